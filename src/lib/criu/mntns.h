#ifndef GCK_CRIU_MNTNS_H
#define GCK_CRIU_MNTNS_H

#include <stdint.h>
#include <sys/types.h>

struct gck_capture;
struct gck_ctx;
struct gck_nsview;
struct gck_ptree;
struct json_t;

/*
 * mntns.c: a tree in a mount namespace of its own (a container's, an
 * Apptainer or enroot job's): what of its mounts comes from this host,
 * which of its descriptors are on files outside it, and what criu is
 * told of both, to dump it and to restore it.
 */
struct gck_mntns_bind {
	char		 key[16];	/* what criu calls it: "m1" */
	char		*at;		/* its mount point, as the tree sees */
	char		*source;	/* the path to it on the dumping host */
	char		*fstype;
};
struct gck_mntns_file {
	char		 key[64];	/* criu's: file[MNTID:INO], in hex */
	char		*path;		/* on the dumping host */
	int		 flags;		/* its open flags */
	int64_t		 pos;
	pid_t		 pid;		/* where it was first seen */
	int		 fd;
};
struct gck_mntns {
	char			*root;	/* the source of its / */
	int			 whole;	/* the tree is all of its PID
					   namespace too: a container */
	struct gck_mntns_bind	*b;
	size_t			 nb;
	struct gck_mntns_file	*f;
	size_t			 nf;
	char			**args;	/* criu's options, dump or restore */
	size_t			 nargs;
	int			*fds;	/* restore: opened for criu to
					   inherit, args naming them 0.. */
	size_t			 nfds;
	char			**made;	/* restore: the cgroups it made,
					   in the order made */
	size_t			 nmade;
};
/* What a restore is told of where the tree's mounts are here. */
struct gck_mntns_where {
	const char	 *root;		/* --root, or NULL */
	char *const	 *map;		/* "AT=SOURCE", as --mount-map gives */
	size_t		  nmap;
	int		  trusted;	/* the image's signature was checked */
	int		  firstfd;	/* where criu finds the fds */
	const int	(*devs)[2];	/* the GPU map: a GPU's device node
					   minor in the image, and here */
	size_t		  ndevs;
};

#define GCK_MNTNS_MAX	200	/* mounts and files criu is told of */
#define GCK_NVIDIA_MAJOR	195	/* the NVIDIA driver's device nodes */
#define GCK_NVIDIA_CTL_MINOR	254	/* from it on: nvidia-modeset, -ctl */

int	gck_mntns_scan(struct gck_ctx *, const struct gck_ptree *,
	    struct gck_mntns **);
struct json_t *gck_mntns_json(const struct gck_mntns *);
int	gck_mntns_parse(struct gck_ctx *, struct json_t *,
	    struct gck_mntns **);
int	gck_mntns_plan(struct gck_ctx *, struct gck_mntns *,
	    const struct gck_mntns_where *);
void	gck_mntns_unmake(struct gck_mntns *);
int	gck_mntns_settle(struct gck_ctx *, struct gck_mntns *,
	    struct gck_capture *, const struct gck_ptree *,
	    const struct gck_nsview *);
void	gck_mntns_free(struct gck_mntns *);

#endif /* GCK_CRIU_MNTNS_H */
