#ifndef GCK_OPS_NEEDS_H
#define GCK_OPS_NEEDS_H

struct gck_ctx;
struct gck_manifest;
struct gck_needs;
struct gck_reader;
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
/* A JSON string of len bytes, its high bytes '?' if they are not UTF-8. */
struct json_t *gck_needs_jstr(const char *, size_t);
/* inspect.c: doc as text, indented, with a final newline. */
int	gck_inspect_text(struct gck_ctx *, struct json_t *, char **);

#endif /* GCK_OPS_NEEDS_H */
