#ifndef GCK_OPS_NEEDS_H
#define GCK_OPS_NEEDS_H

struct gck_ctx;
struct gck_manifest;
struct gck_needs;
struct gck_reader;
struct gck_serve;
struct json_t;

/*
 * needs.c: what the processes of an image have open, read from the CRIU
 * images at its head.  gck_needs_read() returns GCK_OK or a code;
 * gck_needs_doc() the "descriptors" member of gpuinspect's document, or
 * NULL when the image does not tell.
 */
int	gck_needs_read(struct gck_ctx *, struct gck_reader *,
	    const struct gck_manifest *, struct gck_needs **);
struct json_t *gck_needs_doc(const struct gck_needs *);
void	gck_needs_free(struct gck_needs *);
/*
 * Before criu restores an image, whether this host can take its TCP and
 * UDP sockets: their ports free here, the addresses they are bound to
 * here, and, unless the connections are restored closed (the last
 * argument), those of the TCP connections.  The image's small CRIU files
 * are in the directory of the descriptor (the second argument), or, where
 * that is -1, held by the serve; its manifest may be NULL.  Each returns
 * GCK_OK, or a code with one line that says what stands in the way;
 * gck_needs_sockets_check() checks what gck_needs_read() read.
 */
int	gck_needs_restore_check(struct gck_ctx *, int,
	    const struct gck_serve *, const struct gck_manifest *, int);
int	gck_needs_sockets_check(struct gck_ctx *, const struct gck_needs *,
	    const struct gck_manifest *, int);
/* A JSON string of len bytes, its high bytes '?' if they are not UTF-8. */
struct json_t *gck_needs_jstr(const char *, size_t);
/* inspect.c: doc as text, indented, with a final newline. */
int	gck_inspect_text(struct gck_ctx *, struct json_t *, char **);

#endif /* GCK_OPS_NEEDS_H */
