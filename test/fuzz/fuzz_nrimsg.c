// SPDX-License-Identifier: Apache-2.0
/*
 * The messages an NRI plugin receives (agent/proto/nri.proto, ttrpc.proto),
 * unpacked by protobuf-c from bytes a hostile or broken runtime may send. The
 * first byte picks the message (byte % 8): ConfigureRequest,
 * SynchronizeRequest, CreateContainerRequest, StateChangeEvent, Empty
 * (Shutdown's), UpdateContainersResponse, ttrpc.Request, ttrpc.Response; the
 * rest is its packed bytes. Checks beyond the sanitizers, on a message that
 * unpacks: every string, bytes field, repeated field, map entry and nested
 * message is there and bounded by the input (walked through the
 * descriptors, so every field of the subset is covered); packing it again
 * and unpacking that gives the same bytes once more, unless it holds an
 * unknown field numbered 0: protobuf-c takes one from an overlong tag (81 00)
 * and keeps it, but refuses the tag it packs for it (01), which
 * regress/nrimsg/unknown-field-0-overlong-tag found. Field 0 is no field
 * (protobuf's encoding spec): the plugin reads no unknown field, so such a
 * message is as good as one without it.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "nri.pb-c.h"
#include "ttrpc.pb-c.h"

static const ProtobufCMessageDescriptor *const kinds[] = {
	&nri__pkg__api__v1alpha1__configure_request__descriptor,
	&nri__pkg__api__v1alpha1__synchronize_request__descriptor,
	&nri__pkg__api__v1alpha1__create_container_request__descriptor,
	&nri__pkg__api__v1alpha1__state_change_event__descriptor,
	&nri__pkg__api__v1alpha1__empty__descriptor,
	&nri__pkg__api__v1alpha1__update_containers_response__descriptor,
	&ttrpc__request__descriptor,
	&ttrpc__response__descriptor,
};

/*
 * Every field of m (and of what it holds) present and within size bytes;
 * returns whether any of them holds an unknown field numbered 0.
 */
static int walk(const ProtobufCMessage *m, size_t size, int depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	int field0 = 0;

	/* The subset has no recursive message: its depth is the schema's. */
	FUZZ_ASSERT(d && depth < 16);
	FUZZ_ASSERT(m->n_unknown_fields <= size);
	for (unsigned i = 0; i < m->n_unknown_fields; i++) {
		FUZZ_ASSERT(m->unknown_fields[i].len <= size);
		field0 |= m->unknown_fields[i].tag == 0;
	}
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *at = (const char *)m + f->offset;
		int rep = f->label == PROTOBUF_C_LABEL_REPEATED;
		size_t n = 1;
		const char *elts = at;

		if (rep) {
			n = *(const size_t *)((const char *)m + f->quantifier_offset);
			elts = *(const char *const *)at;
			FUZZ_ASSERT(n <= size && (!n || elts));
		}
		for (size_t j = 0; j < n; j++) {
			switch (f->type) {
			case PROTOBUF_C_TYPE_STRING: {
				const char *s = rep ? ((const char *const *)elts)[j]
						    : *(const char *const *)at;

				FUZZ_ASSERT(s && strlen(s) <= size);
				break;
			}
			case PROTOBUF_C_TYPE_BYTES: {
				const ProtobufCBinaryData *b =
					rep ? &((const ProtobufCBinaryData *)elts)[j]
					    : (const ProtobufCBinaryData *)at;

				FUZZ_ASSERT(b->len <= size && (!b->len || b->data));
				break;
			}
			case PROTOBUF_C_TYPE_MESSAGE: {
				const ProtobufCMessage *sm =
					rep ? ((const ProtobufCMessage *const *)elts)[j]
					    : *(const ProtobufCMessage *const *)at;

				if (!rep && !sm)
					break;
				FUZZ_ASSERT(sm && sm->descriptor == f->descriptor);
				field0 |= walk(sm, size, depth + 1);
				break;
			}
			default:
				break;
			}
		}
	}
	return field0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *d;
	ProtobufCMessage *m, *m2;
	uint8_t *p1, *p2;
	size_t n1, n2;

	if (size < 1)
		return 0;
	d = kinds[data[0] % (sizeof(kinds) / sizeof(kinds[0]))];
	m = protobuf_c_message_unpack(d, NULL, size - 1, data + 1);
	if (!m)
		return 0;
	FUZZ_ASSERT(m->descriptor == d && protobuf_c_message_check(m));
	if (walk(m, size, 0)) {
		protobuf_c_message_free_unpacked(m, NULL);
		return 0;
	}
	n1 = protobuf_c_message_get_packed_size(m);
	p1 = malloc(n1 ? n1 : 1);
	FUZZ_ASSERT(p1 && protobuf_c_message_pack(m, p1) == n1);
	m2 = protobuf_c_message_unpack(d, NULL, n1, p1);
	FUZZ_ASSERT(m2);
	walk(m2, size + n1, 0);
	n2 = protobuf_c_message_get_packed_size(m2);
	p2 = malloc(n2 ? n2 : 1);
	FUZZ_ASSERT(p2 && protobuf_c_message_pack(m2, p2) == n2);
	FUZZ_ASSERT(n1 == n2 && !memcmp(p1, p2, n1));
	protobuf_c_message_free_unpacked(m2, NULL);
	protobuf_c_message_free_unpacked(m, NULL);
	free(p1);
	free(p2);
	return 0;
}
