/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_PODSTREAM_H
#define HPN_AGENT_PODSTREAM_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The pod cache's streams cut into pieces (podstream.c), for podwatch.c: the
 * bytes of a watch's event line or of a list's item, and a list page's body
 * followed as it streams in, each item handed on whole as soon as it ends.
 */
#define EVENT_MAX ((size_t)2 << 20) /* one event line, or one item of a list, at most */

/* Bytes cut out of a stream: a watch's event line, a list's item or metadata. */
struct cut {
	char *p; /* NUL-terminated */
	size_t len, cap;
};

/* n more bytes of data onto c, within max: false when over it or out of memory (*oom). */
bool cut_add(struct cut *c, const char *data, size_t n, size_t max, bool *oom);
/* Emptied; a large buffer given back (one hostile pod does not pin 2 MiB). */
void cut_reset(struct cut *c);

/* A whole item of a list (its JSON, len bytes, NUL-terminated): 0, or -ENOMEM. */
typedef int page_item_fn(void *ud, const char *item, size_t len);

/* A list page's body as it streams in: its items cut out one at a time. */
struct page {
	struct cut *buf;    /* the item or metadata being cut */
	page_item_fn *item; /* called with each item */
	void *ud;
	size_t bytes;	/* of the body so far */
	unsigned depth; /* objects and arrays open */
	bool started;	/* the body's object opened */
	bool ended;	/* and closed */
	bool in_str, esc;
	bool want_key; /* at depth 1: the next string is a member's name */
	bool in_key;   /* reading that name */
	char key[16];  /* the name (cut: longer ones match nothing) */
	size_t klen;
	bool items_seen, in_items;
	enum { CUT_NONE, CUT_ITEM, CUT_META } cut;
	bool over;  /* the item being cut is over EVENT_MAX: skipped */
	char *meta; /* the list's metadata object, once it came */
	size_t n_items, n_over;
	const char *bad; /* why the body is not a list of pods */
};

/* A page's body begun (pg's last one freed): its pieces cut into buf, each item to item(ud). */
void page_begin(struct page *pg, struct cut *buf, page_item_fn *item, void *ud);
/* What pg holds freed, and pg emptied. */
void page_free(struct page *pg);
/*
 * A page's bytes, as they come: -EPROTO, the body is not a list of pods;
 * -ENOMEM, here or in item. Then pg->bad says why, and more bytes are refused.
 */
int page_data(struct page *pg, const char *data, size_t len);
/* Why the body so far is not a whole list; NULL: it is. */
const char *page_not_whole(const struct page *pg);

#endif
