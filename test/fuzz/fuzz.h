/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_FUZZ_H
#define HPN_FUZZ_H

/*
 * libFuzzer's entry points, declared for -Wmissing-prototypes. The same
 * harness links with libFuzzer (clang, HPN_FUZZ) or with replay.c (any
 * compiler, every build), which feeds it the corpus and the regression inputs.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/*
 * An invariant the code under test promises. Harnesses print nothing, except
 * the broken invariant just before abort(), which libFuzzer reports as a crash.
 */
#define FUZZ_ASSERT(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz: %s:%d: invariant broken: %s\n", __FILE__, __LINE__, \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#endif
