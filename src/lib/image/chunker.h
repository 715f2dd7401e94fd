#ifndef GCK_IMAGE_CHUNKER_H
#define GCK_IMAGE_CHUNKER_H

#include <stddef.h>
#include <stdint.h>

/*
 * chunker.c: where a process's page data is cut into chunks (format 2,
 * gpuckpt-image(5), "Chunks"): after a page its contents choose, or
 * after GCK_CHUNK_SIZE bytes.
 */
#define GCK_CHUNK_PAGE		4096u
#define GCK_CHUNK_CUTS		128u	/* one page in this many cuts */

struct gck_chunker {
	uint64_t	prev;		/* the hash of the page before */
	size_t		len;		/* bytes of the chunk scanned */
};

void	gck_chunker_start(struct gck_chunker *);
size_t	gck_chunker_scan(struct gck_chunker *, const char *, size_t);

#endif /* GCK_IMAGE_CHUNKER_H */
