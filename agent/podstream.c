// SPDX-License-Identifier: Apache-2.0
/*
 * The pod cache's streams cut into pieces (podstream.h): a list page's body
 * followed as it arrives, each item cut out and handed on alone.
 *
 * A list is read in pages (limit and continue) streamed through the watch's
 * transport: each item is cut out of the body as it arrives and parsed
 * alone, so neither a page nor a pod is held whole beside the cache and no
 * page is refused for its size (the answer cap, HPN_KUBE_BODY_MAX, is for
 * answers kept whole). Only the body's structure is followed here (strings,
 * nesting, the top object's "items" and "metadata"); each piece cut out is
 * parsed as JSON on its own by whoever takes it.
 */
#include "podstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define LIST_META_MAX ((size_t)64 << 10) /* a list's metadata (resourceVersion, continue) */
#define DEPTH_MAX     10000		 /* a list body's nesting */
#define BUF_KEEP      ((size_t)64 << 10) /* a cut buffer larger is freed after use */

bool cut_add(struct cut *c, const char *data, size_t n, size_t max, bool *oom)
{
	if (n > max - c->len)
		return false;
	if (c->len + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 65536;
		char *p;

		while (cap < c->len + n + 1)
			cap *= 2;
		if (cap > max + 1)
			cap = max + 1;
		p = realloc(c->p, cap);
		if (!p) {
			*oom = true;
			return false;
		}
		c->p = p;
		c->cap = cap;
	}
	memcpy(c->p + c->len, data, n);
	c->len += n;
	c->p[c->len] = '\0';
	return true;
}

void cut_reset(struct cut *c)
{
	c->len = 0;
	if (c->cap > BUF_KEEP) {
		free(c->p);
		c->p = NULL;
		c->cap = 0;
	}
}

void page_free(struct page *pg)
{
	free(pg->meta);
	memset(pg, 0, sizeof(*pg));
}

void page_begin(struct page *pg, struct cut *buf, page_item_fn *item, void *ud)
{
	page_free(pg);
	pg->buf = buf;
	pg->item = item;
	pg->ud = ud;
	cut_reset(buf);
}

/* A whole item of the list cut out: handed on. */
static int page_item(struct page *pg)
{
	pg->n_items++;
	if (pg->over) {
		/* Not known: its lookups are "not in the cache", answered by the API. */
		pg->n_over++;
		return 0;
	}
	return pg->item(pg->ud, pg->buf->p, pg->buf->len);
}

/* The list's metadata cut out: kept for the page's end. */
static int page_meta(struct page *pg)
{
	if (pg->meta || pg->over) {
		pg->bad = pg->meta ? "it has two metadata" : "its metadata is too large";
		return -EPROTO;
	}
	pg->meta = strdup(pg->buf->p ? pg->buf->p : "");
	return pg->meta ? 0 : -ENOMEM;
}

/* A cut ends at data[i]: its bytes from data[from], then the item or the metadata. */
static int cut_end(struct page *pg, const char *data, size_t from, size_t i)
{
	size_t max = pg->cut == CUT_META ? LIST_META_MAX : EVENT_MAX;
	bool oom = false;
	int r;

	if (!pg->over && !cut_add(pg->buf, data + from, i + 1 - from, max, &oom)) {
		if (oom)
			return -ENOMEM;
		pg->over = true;
	}
	r = pg->cut == CUT_META ? page_meta(pg) : page_item(pg);
	cut_reset(pg->buf);
	pg->cut = CUT_NONE;
	pg->over = false;
	return r;
}

/* A value opens at depth 1 or 2 (c: its first byte, at data[i]): what it means for the list. */
static int page_open(struct page *pg, char c)
{
	if (pg->depth == 1) {
		if (pg->klen == 5 && !memcmp(pg->key, "items", 5)) {
			if (c != '[' || pg->items_seen) {
				pg->bad = "its items are not one array";
				return -EPROTO;
			}
			pg->items_seen = pg->in_items = true;
		} else if (pg->klen == 8 && !memcmp(pg->key, "metadata", 8) && c == '{') {
			pg->cut = CUT_META;
		}
	} else if (pg->depth == 2 && pg->in_items) {
		if (c != '{') {
			pg->bad = "an item is not an object";
			return -EPROTO;
		}
		pg->cut = CUT_ITEM;
	}
	return 0;
}

/*
 * A page's bytes: the body's structure followed (strings, nesting), each
 * item of the top object's "items" and its "metadata" cut out whole; the
 * rest (kind, apiVersion) passed over. Not JSON enough to follow: -EPROTO,
 * pg->bad says why; each cut is parsed as JSON on its own.
 */
static int follow(struct page *pg, const char *data, size_t len)
{
	size_t from = 0;
	int r;

	if (pg->bad)
		return -EPROTO;
	pg->bytes += len;
	for (size_t i = 0; i < len; i++) {
		char c = data[i];

		if (pg->in_str) {
			if (pg->esc) {
				pg->esc = false;
			} else if (c == '\\') {
				pg->esc = true;
				if (pg->in_key)
					pg->klen = sizeof(pg->key); /* escaped: matches nothing */
			} else if (c == '"') {
				pg->in_str = pg->in_key = false;
			} else if (pg->in_key && pg->klen < sizeof(pg->key)) {
				pg->key[pg->klen++] = c;
			}
			continue;
		}
		switch (c) {
		case ' ':
		case '\t':
		case '\n':
		case '\r':
			continue;
		case '"':
			if (!pg->started || pg->ended) {
				pg->bad = "it is not a JSON object";
				return -EPROTO;
			}
			if (pg->depth == 2 && pg->in_items) {
				pg->bad = "an item is not an object";
				return -EPROTO;
			}
			pg->in_str = true;
			if (pg->depth == 1 && pg->want_key) {
				pg->in_key = true;
				pg->want_key = false;
				pg->klen = 0;
			}
			continue;
		case '{':
		case '[':
			if (!pg->started) {
				if (c != '{')
					break;
				pg->started = pg->want_key = true;
				pg->depth = 1;
				continue;
			}
			if (pg->ended || pg->depth >= DEPTH_MAX)
				break;
			if (pg->cut == CUT_NONE) {
				r = page_open(pg, c);
				if (r < 0)
					return r;
				if (pg->cut != CUT_NONE)
					from = i;
			}
			pg->depth++;
			continue;
		case '}':
		case ']':
			if (!pg->started || pg->ended)
				break;
			pg->depth--;
			if (pg->depth == 0) {
				if (c != '}')
					break;
				pg->ended = true;
			} else if ((pg->cut == CUT_META && pg->depth == 1) ||
				   (pg->cut == CUT_ITEM && pg->depth == 2)) {
				r = cut_end(pg, data, from, i);
				if (r < 0)
					return r;
			} else if (pg->in_items && pg->depth == 1) {
				pg->in_items = false;
			}
			continue;
		case ',':
			if (pg->depth == 1)
				pg->want_key = true;
			if (pg->started && !pg->ended)
				continue;
			break;
		default:
			/* A number or a literal: a member's value, never an item nor outside. */
			if (pg->started && !pg->ended && !(pg->depth == 2 && pg->in_items))
				continue;
			if (pg->depth == 2 && pg->in_items) {
				pg->bad = "an item is not an object";
				return -EPROTO;
			}
			break;
		}
		pg->bad = "it is not a JSON object";
		return -EPROTO;
	}
	if (pg->cut != CUT_NONE && !pg->over) {
		bool oom = false;

		if (!cut_add(pg->buf, data + from, len - from,
			     pg->cut == CUT_META ? LIST_META_MAX : EVENT_MAX, &oom)) {
			if (oom)
				return -ENOMEM;
			pg->over = true;
			cut_reset(pg->buf);
		}
	}
	return 0;
}

int page_data(struct page *pg, const char *data, size_t len)
{
	int r = follow(pg, data, len);

	if (r == -ENOMEM && !pg->bad)
		pg->bad = "out of memory";
	return r;
}

const char *page_not_whole(const struct page *pg)
{
	if (pg->bad)
		return pg->bad;
	if (!pg->ended)
		return pg->started ? "it ended before its end" : "it is empty";
	return pg->items_seen ? NULL : "it has no items";
}
