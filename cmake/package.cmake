# What `cmake --install` puts beside the binary, and the Debian package of it
# all (cpack -G DEB in the build tree). Included from the top CMakeLists.txt,
# where include(CPack) must run. Paths relative to the prefix (/usr in the
# package); the binary goes to CNI_BIN_DIR (/opt/cni/bin).

# The man page, compressed as Debian wants it (-n: no timestamp, reproducible).
set(HPN_MAN_GZ ${CMAKE_BINARY_DIR}/hpn-rdma.8.gz)
add_custom_command(OUTPUT ${HPN_MAN_GZ}
	COMMAND sh -c "gzip -9nc '${CMAKE_SOURCE_DIR}/doc/hpn-rdma.8' > '${HPN_MAN_GZ}'"
	DEPENDS ${CMAKE_SOURCE_DIR}/doc/hpn-rdma.8
	COMMENT "Compressing the man page"
	VERBATIM)
add_custom_target(hpn-rdma-man ALL DEPENDS ${HPN_MAN_GZ})
install(FILES ${HPN_MAN_GZ} DESTINATION share/man/man8)

file(GLOB HPN_CONF_EXAMPLES ${CMAKE_SOURCE_DIR}/conf/*.conf ${CMAKE_SOURCE_DIR}/conf/*.conflist)
install(FILES ${HPN_CONF_EXAMPLES} DESTINATION share/hpn-rdma/examples)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION share/doc/hpn-rdma)
# The reference pages the README links to, at the same relative place (doc/).
file(GLOB HPN_DOC_PAGES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/doc/*.md)
install(FILES ${HPN_DOC_PAGES} DESTINATION share/doc/hpn-rdma/doc)
install(FILES ${CMAKE_SOURCE_DIR}/LICENSE DESTINATION share/doc/hpn-rdma RENAME copyright)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hpn-rdma)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "hpn-rdma")
set(CPACK_PACKAGE_CONTACT "hpn-rdma maintainers <hpn-rdma@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "CNI plugin that moves an RDMA NIC into a Kubernetes pod as hpn0")
# The long description; CPack puts the summary above it and indents each line.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "hpn-rdma moves a host netdev (mlx5, Alibaba Cloud eRDMA, Soft-RoCE) into a\n\
pod's network namespace, binds the RDMA verbs device behind it and proves it\n\
usable from inside the pod; 'hpn-rdma doctor' checks a node. The plugin is\n\
installed to ${CNI_BIN_DIR}; example configs are in /usr/share/hpn-rdma/examples.")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Depends: dpkg-shlibdeps (dpkg-dev) appends what the binary links to these, which
# it cannot see: libibverbs and librdmacm are dlopen()ed by the bind check (verbs.c),
# libcurl and libyaml by the Kubernetes API lookup (kube.c, kubeconfig.c: dl.h).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libibverbs1, librdmacm1, libcurl4, libyaml-0-2")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "containernetworking-plugins, rdma-core")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
include(CPack)
