#ifndef GCK_CORE_MOUNTS_H
#define GCK_CORE_MOUNTS_H

struct gck_ctx;

/*
 * mounts.c: the mounts of a mount namespace, as its mountinfo says, and
 * which of them are binds of what another namespace (ours) can reach.
 */
struct gck_mount {
	int		 id, parent;
	unsigned int	 major, minor;
	char		*root;		/* within its file system */
	char		*at;		/* its mount point there */
	char		*fstype;
	char		*source;
	char		*host;		/* the path to its root here, where a
					   mount of ours holds it; or NULL */
};
struct gck_mounts {
	struct gck_mount *m;
	size_t		  n, cap;
};
int	gck_mountinfo_parse(struct gck_ctx *, const char *,
	    struct gck_mounts **);
int	gck_mountinfo_read(struct gck_ctx *, pid_t, struct gck_mounts **);
int	gck_mounts_resolve(struct gck_ctx *, struct gck_mounts *,
	    const struct gck_mounts *);
const struct gck_mount *gck_mounts_find(const struct gck_mounts *, int);
const struct gck_mount *gck_mounts_root(const struct gck_mounts *);
void	gck_mounts_free(struct gck_mounts *);

#endif /* GCK_CORE_MOUNTS_H */
