/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_SHA256_H
#define HPN_AGENT_SHA256_H

#include <stddef.h>

/* The SHA-256 of data[0..len) in lower-case hex, as sha256sum(1) prints it (the manifest's). */
#define INST_SHA256_HEX 65
void inst_sha256(const void *data, size_t len, char out[INST_SHA256_HEX]);

#endif
