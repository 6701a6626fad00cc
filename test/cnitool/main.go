// hpn-cnitool: a minimal CNI runtime for the netns test tier.
//
// It drives plugins exactly as a container runtime does, through libcni
// (Debian's golang-github-appc-cni-dev), so chaining, prevResult handling,
// capability injection and result caching are those of the real library.
//
// Usage: hpn-cnitool add|check|del <netname> <netns-path>
//
// Environment:
//
//	NETCONFPATH      directory holding *.conflist / *.conf / *.json (default /etc/cni/net.d)
//	CNI_PATH         plugin directories, colon separated (required)
//	CNI_IFNAME       interface name given to the plugins (default eth0)
//	CNI_CONTAINERID  container ID (default: derived from the netns path)
//	CNI_ARGS         "K=V;K=V" plugin arguments
//	CAP_ARGS         JSON object of capability arguments, injected as runtimeConfig
//	CNI_CACHE_DIR    libcni result cache (default: libcni's, /var/lib/cni)
//
// On success "add" prints the result JSON on stdout; "check" and "del" print
// nothing. On failure the error is printed on stderr, a plugin's CNI error
// JSON is printed on stdout, and the exit status is 1.
package main

import (
	"context"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

func usage() {
	fmt.Fprintf(os.Stderr, "usage: %s add|check|del <netname> <netns-path>\n",
		filepath.Base(os.Args[0]))
	os.Exit(2)
}

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "hpn-cnitool: "+format+"\n", a...)
	os.Exit(1)
}

// failCNI reports a failed operation. A plugin's own CNI error is also
// printed on stdout as the error object of the spec, so tests can assert
// its code.
func failCNI(err error, cniVersion string, format string, a ...interface{}) {
	var cerr *types.Error
	if errors.As(err, &cerr) {
		out, _ := json.Marshal(map[string]interface{}{
			"cniVersion": cniVersion,
			"code":       cerr.Code,
			"msg":        cerr.Msg,
			"details":    cerr.Details,
		})
		fmt.Println(string(out))
	}
	fail(format+": %v", append(a, err)...)
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// parseArgs turns "K=V;K=V" into the pairs libcni wants.
func parseArgs(s string) ([][2]string, error) {
	var out [][2]string
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("bad CNI_ARGS element %q", kv)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func main() {
	if len(os.Args) != 4 {
		usage()
	}
	cmd, netName, netns := os.Args[1], os.Args[2], os.Args[3]

	cniPath := os.Getenv("CNI_PATH")
	if cniPath == "" {
		fail("CNI_PATH is not set")
	}
	confDir := envOr("NETCONFPATH", "/etc/cni/net.d")

	list, err := libcni.LoadConfList(confDir, netName)
	if err != nil {
		fail("load network %q from %s: %v", netName, confDir, err)
	}

	pluginArgs, err := parseArgs(os.Getenv("CNI_ARGS"))
	if err != nil {
		fail("%v", err)
	}

	var capArgs map[string]interface{}
	if s := os.Getenv("CAP_ARGS"); s != "" {
		if err := json.Unmarshal([]byte(s), &capArgs); err != nil {
			fail("CAP_ARGS is not a JSON object: %v", err)
		}
	}

	containerID := os.Getenv("CNI_CONTAINERID")
	if containerID == "" {
		// Same netns, same ID: lets add and del pair up without state here.
		sum := sha512.Sum512([]byte(netns))
		containerID = fmt.Sprintf("cnitool-%x", sum[:10])
	}

	rt := &libcni.RuntimeConf{
		ContainerID:    containerID,
		NetNS:          netns,
		IfName:         envOr("CNI_IFNAME", "eth0"),
		Args:           pluginArgs,
		CapabilityArgs: capArgs,
	}

	cni := libcni.NewCNIConfigWithCacheDir(filepath.SplitList(cniPath),
		os.Getenv("CNI_CACHE_DIR"), nil)
	ctx := context.Background()

	switch cmd {
	case "add":
		res, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			failCNI(err, list.CNIVersion, "add %s", netName)
		}
		if err := res.Print(); err != nil {
			fail("print result: %v", err)
		}
	case "check":
		if err := cni.CheckNetworkList(ctx, list, rt); err != nil {
			failCNI(err, list.CNIVersion, "check %s", netName)
		}
	case "del":
		if err := cni.DelNetworkList(ctx, list, rt); err != nil {
			failCNI(err, list.CNIVersion, "del %s", netName)
		}
	default:
		usage()
	}
}
