#ifndef GCK_CORE_CUT_H
#define GCK_CORE_CUT_H

struct gck_ctx;
struct gck_cut;

/*
 * cut.c: one checkpoint cut across hosts, its gpuckpts (one a host,
 * size in all) meeting in a directory they share.  Each posts what it
 * has reached, a phase, as DIR/NAME.PHASE with a text, and waits until
 * every one has posted it; a failure posted as DIR/NAME.failed, with its
 * message, ends every wait with it.  The directory is the caller's, one
 * a cut: the files stay there.
 *
 * gck_cut_gather() returns GCK_OK with *textp the others' texts, each
 * line "NAME TEXTLINE" (free()), GCK_ETIMEDOUT or a code, the message
 * set, naming a host that failed or those that did not come.
 */
#define GCK_CUT_DUMP_MS		1800000	/* the others' dumps, at most */
#define GCK_CUT_COMMIT_MS	60000	/* their renames */

int	gck_cut_open(struct gck_ctx *, const char *, unsigned int, const char *,
	    struct gck_cut **);
const char *gck_cut_name(const struct gck_cut *);
int	gck_cut_post(struct gck_ctx *, struct gck_cut *, const char *,
	    const char *);
int	gck_cut_gather(struct gck_ctx *, struct gck_cut *, const char *,
	    int64_t, char **);
void	gck_cut_fail(struct gck_cut *, const char *);
void	gck_cut_free(struct gck_cut *);

#endif /* GCK_CORE_CUT_H */
