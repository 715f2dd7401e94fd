/*
 * mntns.c: a tree in a mount namespace of its own, in our PID namespace
 * (an Apptainer or enroot job, a Slurm container step).
 *
 * criu dumps the namespace's mounts itself, and makes again on restore
 * those made inside it (its proc, a tmpfs).  What it cannot do alone is
 * what comes from the host, and the image records it by its path here:
 * - the root file system (criu restore --root);
 * - every mount bound from here outside the root file system (a data
 *   directory, a cgroup controller, a device node): an external mount
 *   of criu's, named m1, m2...  on dump and mapped to a path on
 *   restore;
 * - every descriptor on a file no mount of the namespace holds (a
 *   batch step's standard input on the host's /dev/null, its output in
 *   a log file of the host's): an external file of criu's, which a
 *   restore opens here, as it was opened (flags, offset), for criu to
 *   give the tree, as criu reopens any other file.
 * A restore takes those sources from the image only when its signature
 * was checked against allowed_signers; else the user names each one
 * (--root, --mount-map), so that an image cannot mount what its maker
 * chose (/etc, /root, a device) into a process of its maker's.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "private.h"
#include "core/mounts.h"
#include "core/proc.h"
#include "criu/mntns.h"
#include "criu/pagemap.h"
#include "criu/streamer.h"
#include "criu/criu-images.pb-c.h"

/* A descriptor of the tree's, as fd_read found it. */
struct fd_seen {
	char		 link[PATH_MAX];
	char		 key[64];	/* file[MNTID:INO] */
	uint64_t	 ino;
	int64_t		 pos;
	int		 mnt, flags;
};

static int	 same_ns(pid_t, pid_t, const char *);
static int	 fd_info(pid_t, int, int *, int *, int64_t *);
static int	 fd_read(pid_t, int, struct fd_seen *);
static int	 mnt_agrees(const char *, int);
static int	 add_file(struct gck_ctx *, struct gck_mntns *,
		    const struct fd_seen *, pid_t, int);
static struct gck_mntns_file *file_of(struct gck_mntns *, const char *);
static int	 add_arg(struct gck_mntns *, const char *, const char *);
static int	 inside_root(const struct gck_mount *,
		    const struct gck_mount *);
static int	 scan_binds(struct gck_ctx *, struct gck_mntns *,
		    const struct gck_mounts *);
static int	 scan_fds(struct gck_ctx *, struct gck_mntns *,
		    const struct gck_ptree *, const struct gck_mounts *);
static const char *map_of(const struct gck_mntns_where *, const char *,
		    int *);
static int	 source_ok(struct gck_ctx *, const char *, const char *,
		    int);
static int	 cgroup_here(struct gck_ctx *, struct gck_mntns *,
		    const struct gck_mntns_bind *, int *);
static int	 made_add(struct gck_mntns *, const char *);
static int	 make_cgroup(struct gck_ctx *, struct gck_mntns *,
		    const char *);
static int	 nvidia_node(const char *);
static int	 nvidia_here(struct gck_ctx *, const struct gck_mntns_bind *,
		    const struct gck_mntns_where *, char *, size_t,
		    const char **, int *);

void
gck_mntns_free(struct gck_mntns *ns)
{
	size_t	i;

	if (ns == NULL)
		return;
	free(ns->root);
	for (i = 0; i < ns->nb; i++) {
		free(ns->b[i].at);
		free(ns->b[i].source);
		free(ns->b[i].fstype);
	}
	free(ns->b);
	for (i = 0; i < ns->nf; i++)
		free(ns->f[i].path);
	free(ns->f);
	for (i = 0; i < ns->nargs; i++)
		free(ns->args[i]);
	free(ns->args);
	for (i = 0; i < ns->nfds; i++)
		if (ns->fds[i] != -1)
			close(ns->fds[i]);
	free(ns->fds);
	for (i = 0; i < ns->nmade; i++)
		free(ns->made[i]);
	free(ns->made);
	free(ns);
}

/* Whether processes a and b are in the same namespace of kind ns. */
static int
same_ns(pid_t a, pid_t b, const char *ns)
{
	struct stat	sa, sb;
	char		path[64];

	snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)a, ns);
	if (stat(path, &sa) == -1)
		return -1;
	snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)b, ns);
	if (stat(path, &sb) == -1)
		return -1;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Appends "OPT" and "VAL" to ns->args.  Returns 0, or -1. */
static int
add_arg(struct gck_mntns *ns, const char *opt, const char *val)
{
	char	**a;

	if ((a = reallocarray(ns->args, ns->nargs + 3, sizeof *a)) == NULL)
		return -1;
	ns->args = a;
	if ((a[ns->nargs] = strdup(opt)) == NULL)
		return -1;
	ns->nargs++;
	if ((a[ns->nargs] = strdup(val)) == NULL)
		return -1;
	ns->nargs++;
	a[ns->nargs] = NULL;
	return 0;
}

/*
 * Whether mount m is of the root mount's file system and under its
 * root: criu binds it from there itself.
 */
static int
inside_root(const struct gck_mount *root, const struct gck_mount *m)
{
	size_t	len = strlen(root->root);

	if (m->major != root->major || m->minor != root->minor)
		return 0;
	if (strcmp(root->root, "/") == 0)
		return 1;
	return strncmp(m->root, root->root, len) == 0 &&
	    (m->root[len] == '/' || m->root[len] == '\0');
}

/* The mounts bound from here, outside its root file system. */
static int
scan_binds(struct gck_ctx *ctx, struct gck_mntns *ns,
    const struct gck_mounts *theirs)
{
	const struct gck_mount	*root, *m;
	struct gck_mntns_bind	*b;
	char			 spec[PATH_MAX + 8];
	size_t			 i;

	root = gck_mounts_root(theirs);
	for (i = 0; i < theirs->n; i++) {
		m = &theirs->m[i];
		if (m == root || m->host == NULL || inside_root(root, m))
			continue;
		if (ns->nb + ns->nf >= GCK_MNTNS_MAX)
			return gck_set_error(ctx, GCK_EINVAL, "the tree's "
			    "mount namespace has more than %d mounts from "
			    "this host", GCK_MNTNS_MAX);
		if ((b = reallocarray(ns->b, ns->nb + 1, sizeof *b)) == NULL)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		ns->b = b;
		b = &ns->b[ns->nb];
		memset(b, 0, sizeof *b);
		snprintf(b->key, sizeof b->key, "m%zu", ns->nb + 1);
		ns->nb++;
		if ((b->at = strdup(m->at)) == NULL ||
		    (b->source = strdup(m->host)) == NULL ||
		    (b->fstype = strdup(m->fstype)) == NULL)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		snprintf(spec, sizeof spec, "mnt[%s]:%s", m->at, b->key);
		if (add_arg(ns, "--external", spec) == -1)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	return GCK_OK;
}

/*
 * What /proc/PID/fdinfo/FD says of a descriptor: its mount's id, its
 * flags, its offset.  Returns 0, or -1.
 */
static int
fd_info(pid_t pid, int fd, int *mntp, int *flagsp, int64_t *posp)
{
	FILE		*f;
	char		 path[64], line[256];
	long long	 pos;
	unsigned int	 flags;
	int		 mnt, got = 0;

	snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)pid, fd);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (sscanf(line, "pos: %lld", &pos) == 1) {
			*posp = pos;
			got |= 1;
		} else if (sscanf(line, "flags: %o", &flags) == 1) {
			*flagsp = (int)flags;
			got |= 2;
		} else if (sscanf(line, "mnt_id: %d", &mnt) == 1) {
			*mntp = mnt;
			got |= 4;
		}
	}
	fclose(f);
	return got == 7 ? 0 : -1;
}

/*
 * What descriptor fd of process pid is on, read so that all of it is of
 * the one file: the tree may be running, and a shell's loop opens and
 * closes its descriptors as it goes (echo >file), so each part is read
 * between two looks at the file, which must agree.  Returns 1 with *s
 * filled in for a file with a path (regular, a directory, a device), 0
 * for anything else (a pipe, a socket, a memfd, no such descriptor).
 */
static int
fd_read(pid_t pid, int fd, struct fd_seen *s)
{
	struct stat	sb, again;
	char		path[64], link2[PATH_MAX];
	ssize_t		n, n2;
	int		tries;

	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
	for (tries = 0; tries < 8; tries++) {
		if (stat(path, &sb) == -1 || !(S_ISREG(sb.st_mode) ||
		    S_ISDIR(sb.st_mode) || S_ISCHR(sb.st_mode) ||
		    S_ISBLK(sb.st_mode)))
			return 0;
		if ((n = readlink(path, s->link, sizeof s->link - 1)) <= 0)
			return 0;
		s->link[n] = '\0';
		if (fd_info(pid, fd, &s->mnt, &s->flags, &s->pos) == -1)
			return 0;
		if (stat(path, &again) == -1 ||
		    (n2 = readlink(path, link2, sizeof link2 - 1)) <= 0)
			return 0;
		link2[n2] = '\0';
		if (again.st_dev == sb.st_dev && again.st_ino == sb.st_ino &&
		    strcmp(link2, s->link) == 0 && mnt_agrees(path, s->mnt))
			break;
	}
	if (tries == 8)
		return 0;	/* never still: criu will find it as it is */
	if (s->link[0] != '/' || strncmp(s->link, "/memfd:", 7) == 0)
		return 0;
	s->ino = (uint64_t)sb.st_ino;
	snprintf(s->key, sizeof s->key, "file[%x:%" PRIx64 "]", s->mnt,
	    s->ino);
	return 1;
}

/*
 * Whether the file at path is on mount mnt (statx's word, where this
 * kernel gives it): fdinfo and the file were read of one descriptor.
 */
static int
mnt_agrees(const char *path, int mnt)
{
#ifdef STATX_MNT_ID
	struct statx	sx;

	if (statx(AT_FDCWD, path, 0, STATX_MNT_ID, &sx) == 0 &&
	    (sx.stx_mask & STATX_MNT_ID))
		return sx.stx_mnt_id == (uint64_t)mnt;
#else
	(void)path;
	(void)mnt;
#endif
	return 1;
}

/* Records s, seen on fd of pid, as a file outside the namespace. */
static int
add_file(struct gck_ctx *ctx, struct gck_mntns *ns, const struct fd_seen *s,
    pid_t pid, int fd)
{
	struct gck_mntns_file	*f;

	if (ns->nb + ns->nf >= GCK_MNTNS_MAX)
		return gck_set_error(ctx, GCK_EINVAL, "the tree has more "
		    "than %d files outside its mount namespace open",
		    GCK_MNTNS_MAX);
	if ((f = reallocarray(ns->f, ns->nf + 1, sizeof *f)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	ns->f = f;
	f = &ns->f[ns->nf++];
	memset(f, 0, sizeof *f);
	snprintf(f->key, sizeof f->key, "%s", s->key);
	f->flags = s->flags;
	f->pos = s->pos;
	f->pid = pid;
	f->fd = fd;
	if ((f->path = strdup(s->link)) == NULL ||
	    add_arg(ns, "--external", s->key) == -1)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	return GCK_OK;
}

/* The file of ns with key, or NULL. */
static struct gck_mntns_file *
file_of(struct gck_mntns *ns, const char *key)
{
	size_t	i;

	for (i = 0; i < ns->nf; i++)
		if (strcmp(ns->f[i].key, key) == 0)
			return &ns->f[i];
	return NULL;
}

/* The descriptors of the tree on files no mount of the namespace has. */
static int
scan_fds(struct gck_ctx *ctx, struct gck_mntns *ns,
    const struct gck_ptree *t, const struct gck_mounts *theirs)
{
	struct fd_seen	 s;
	struct dirent	*de;
	DIR		*d;
	char		 path[64];
	size_t		 i, len;
	int		 fd, r = GCK_OK;

	for (i = 0; i < t->n && r == GCK_OK; i++) {
		snprintf(path, sizeof path, "/proc/%d/fd", (int)t->procs[i].pid);
		if ((d = opendir(path)) == NULL)
			continue;
		while (r == GCK_OK && (de = readdir(d)) != NULL) {
			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			fd = atoi(de->d_name);
			/* Pipes and sockets are criu's, wherever they are. */
			if (!fd_read(t->procs[i].pid, fd, &s) ||
			    gck_mounts_find(theirs, s.mnt) != NULL)
				continue;
			len = strlen(s.link);
			if (len > 10 && strcmp(s.link + len - 10,
			    " (deleted)") == 0) {
				r = gck_set_error(ctx, GCK_EINVAL, "cannot "
				    "checkpoint pid %d: process %d has '%s' "
				    "open on fd %d, a file outside its mount "
				    "namespace that is deleted", (int)t->procs[0].pid,
				    (int)t->procs[i].pid, s.link, fd);
				break;
			}
			if (file_of(ns, s.key) == NULL)
				r = add_file(ctx, ns, &s, t->procs[i].pid, fd);
		}
		closedir(d);
	}
	return r;
}

/*
 * Finds whether tree t is in a mount namespace of its own, and if so
 * what of it comes from this host, into *nsp, with what criu dump is
 * to be told of it (its args); else *nsp is NULL.  Returns GCK_OK or a
 * code: the tree's processes are all in the one namespace, and its
 * root file system is one we reach.
 */
int
gck_mntns_scan(struct gck_ctx *ctx, const struct gck_ptree *t,
    struct gck_mntns **nsp)
{
	struct gck_mounts	*ours = NULL, *theirs = NULL;
	const struct gck_mount	*root;
	struct gck_mntns	*ns = NULL;
	pid_t			 pid = t->procs[0].pid;
	size_t			 i;
	int			 r, s;

	*nsp = NULL;
	if ((s = same_ns(getpid(), pid, "mnt")) == -1)
		return gck_set_syserr(ctx, errno, "cannot read the mount "
		    "namespace of pid %d: %s", (int)pid, strerror(errno));
	if (s)
		return GCK_OK;
	for (i = 1; i < t->n; i++)
		if (same_ns(pid, t->procs[i].pid, "mnt") == 0)
			return gck_set_error(ctx, GCK_EINVAL, "cannot "
			    "checkpoint pid %d: process %d ('%s') is in "
			    "another mount namespace than the tree's root, "
			    "which criu cannot dump", (int)pid,
			    (int)t->procs[i].pid, t->procs[i].comm);
	if ((r = gck_mountinfo_read(ctx, getpid(), &ours)) != GCK_OK ||
	    (r = gck_mountinfo_read(ctx, pid, &theirs)) != GCK_OK ||
	    (r = gck_mounts_resolve(ctx, theirs, ours)) != GCK_OK)
		goto out;
	if ((root = gck_mounts_root(theirs)) == NULL || root->host == NULL) {
		r = gck_set_error(ctx, GCK_EINVAL, "cannot checkpoint pid %d: "
		    "its mount namespace's root file system (%s, a %s) is "
		    "one no mount of this host holds, which a restore could "
		    "not find", (int)pid, root != NULL ? root->source : "?",
		    root != NULL ? root->fstype : "?");
		goto out;
	}
	if ((ns = calloc(1, sizeof *ns)) == NULL ||
	    (ns->root = strdup(root->host)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = scan_binds(ctx, ns, theirs)) != GCK_OK ||
	    (r = scan_fds(ctx, ns, t, theirs)) != GCK_OK)
		goto out;
	gck_log(ctx, 1, "pid %d is in a mount namespace of its own: its "
	    "root is '%s' here, %zu mount%s and %zu file%s outside it",
	    (int)pid, ns->root, ns->nb, ns->nb == 1 ? "" : "s", ns->nf,
	    ns->nf == 1 ? "" : "s");
	*nsp = ns;
	ns = NULL;
out:
	gck_mntns_free(ns);
	gck_mounts_free(ours);
	gck_mounts_free(theirs);
	return r;
}

/* The manifest's "mounts": what a restore and gpuinspect read. */
json_t *
gck_mntns_json(const struct gck_mntns *ns)
{
	json_t	*o, *binds, *files;
	size_t	 i;

	if ((binds = json_array()) == NULL)
		return NULL;
	if ((files = json_array()) == NULL) {
		json_decref(binds);
		return NULL;
	}
	for (i = 0; i < ns->nb; i++)
		if (json_array_append_new(binds, json_pack("{s:s, s:s, s:s, "
		    "s:s}", "key", ns->b[i].key, "at", ns->b[i].at, "source",
		    ns->b[i].source, "fstype", ns->b[i].fstype)) != 0)
			goto fail;
	for (i = 0; i < ns->nf; i++)
		if (json_array_append_new(files, json_pack("{s:s, s:s, s:i, "
		    "s:I, s:i, s:i}", "key", ns->f[i].key, "path",
		    ns->f[i].path, "flags", ns->f[i].flags, "pos",
		    (json_int_t)ns->f[i].pos, "pid", (int)ns->f[i].pid,
		    "fd", ns->f[i].fd)) != 0)
			goto fail;
	o = json_pack("{s:s, s:o, s:o}", "root", ns->root, "binds", binds,
	    "files", files);
	if (o != NULL && ns->whole && json_object_set_new(o, "whole_pidns",
	    json_true()) != 0) {
		json_decref(o);
		o = NULL;
	}
	return o;
fail:
	json_decref(binds);
	json_decref(files);
	return NULL;
}

/*
 * Reads the manifest's "mounts" (o; NULL where the tree shared its
 * maker's mount namespace: *nsp is then NULL).  Returns GCK_OK or
 * GCK_EFORMAT.
 */
int
gck_mntns_parse(struct gck_ctx *ctx, json_t *o, struct gck_mntns **nsp)
{
	struct gck_mntns	*ns;
	json_t			*binds, *files, *e;
	const char		*root, *key, *at, *src, *fstype, *path;
	json_int_t		 pos;
	size_t			 i;
	int			 flags, pid, fd;

	*nsp = NULL;
	if (o == NULL)
		return GCK_OK;
	if (json_unpack(o, "{s:s, s:o, s:o}", "root", &root, "binds", &binds,
	    "files", &files) != 0 || !json_is_array(binds) ||
	    !json_is_array(files) || root[0] != '/' ||
	    json_array_size(binds) + json_array_size(files) > GCK_MNTNS_MAX)
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: its "
		    "manifest's \"mounts\" are not as gpuckpt writes them");
	if ((ns = calloc(1, sizeof *ns)) == NULL ||
	    (ns->root = strdup(root)) == NULL ||
	    (ns->b = calloc(json_array_size(binds) + 1, sizeof *ns->b)) ==
	    NULL ||
	    (ns->f = calloc(json_array_size(files) + 1, sizeof *ns->f)) ==
	    NULL) {
		gck_mntns_free(ns);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	json_array_foreach(binds, i, e) {
		if (json_unpack(e, "{s:s, s:s, s:s, s:s}", "key", &key, "at",
		    &at, "source", &src, "fstype", &fstype) != 0 ||
		    strlen(key) >= sizeof ns->b[i].key || at[0] != '/' ||
		    src[0] != '/' || strpbrk(key, "[]:") != NULL)
			goto bad;
		snprintf(ns->b[i].key, sizeof ns->b[i].key, "%s", key);
		ns->nb++;
		if ((ns->b[i].at = strdup(at)) == NULL ||
		    (ns->b[i].source = strdup(src)) == NULL ||
		    (ns->b[i].fstype = strdup(fstype)) == NULL)
			goto nomem;
	}
	json_array_foreach(files, i, e) {
		if (json_unpack(e, "{s:s, s:s, s:i, s:I, s:i, s:i}", "key",
		    &key, "path", &path, "flags", &flags, "pos", &pos, "pid",
		    &pid, "fd", &fd) != 0 || strncmp(key, "file[", 5) != 0 ||
		    strlen(key) >= sizeof ns->f[i].key || path[0] != '/' ||
		    pos < 0)
			goto bad;
		snprintf(ns->f[i].key, sizeof ns->f[i].key, "%s", key);
		ns->nf++;
		ns->f[i].flags = flags;
		ns->f[i].pos = pos;
		ns->f[i].pid = pid;
		ns->f[i].fd = fd;
		if ((ns->f[i].path = strdup(path)) == NULL)
			goto nomem;
	}
	ns->whole = json_is_true(json_object_get(o, "whole_pidns"));
	*nsp = ns;
	return GCK_OK;
bad:
	gck_mntns_free(ns);
	return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: its "
	    "manifest's \"mounts\" are not as gpuckpt writes them");
nomem:
	gck_mntns_free(ns);
	return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
}

/*
 * Where the mount at `at` (the image's source src) comes from here: the
 * source --mount-map names for it (*named set), else src.
 */
static const char *
map_of(const struct gck_mntns_where *w, const char *at, int *named)
{
	size_t	i, len = strlen(at);

	*named = 0;
	for (i = 0; i < w->nmap; i++)
		if (strncmp(w->map[i], at, len) == 0 && w->map[i][len] == '=') {
			*named = 1;
			return w->map[i] + len + 1;
		}
	return NULL;
}

/*
 * Checks that source src of the mount at `at` may be used and is here.
 * Returns GCK_OK or a code.
 */
static int
source_ok(struct gck_ctx *ctx, const char *at, const char *src,
    int allowed)
{
	struct stat	sb;
	char		opt[PATH_MAX + 16];
	int		root = strcmp(at, "/") == 0;

	if (root)
		snprintf(opt, sizeof opt, "--root DIR");
	else
		snprintf(opt, sizeof opt, "--mount-map %s=DIR", at);
	if (!allowed)
		return gck_set_error(ctx, GCK_EUNSAFE, "the image mounts "
		    "'%s' of its host at '%s' in the job, and is not signed "
		    "by a key that allowed_signers allows: name the source "
		    "yourself (%s)", src, at, opt);
	if (stat(src, &sb) == -1)
		return gck_set_syserr(ctx, errno, root ? "the job's root "
		    "file system '%s' is missing here: %s (%s says where it "
		    "is)" : "the source '%s' of the job's mount at '%s' is "
		    "missing here: %s (%s says where it is)", src, root ?
		    strerror(errno) : at, root ? opt : strerror(errno), opt);
	if (root && !S_ISDIR(sb.st_mode))
		return gck_set_error(ctx, GCK_EINVAL, "the job's root file "
		    "system '%s' is not a directory", src);
	return GCK_OK;
}

/* Notes directory path as one the restore made.  Returns 0, or -1. */
static int
made_add(struct gck_mntns *ns, const char *path)
{
	char	**m;

	if ((m = reallocarray(ns->made, ns->nmade + 1, sizeof *m)) == NULL)
		return -1;
	ns->made = m;
	if ((m[ns->nmade] = strdup(path)) == NULL)
		return -1;
	ns->nmade++;
	return 0;
}

/* mkdir path, a cgroup, noted if made.  Returns GCK_OK or a code. */
static int
make_cgroup(struct gck_ctx *ctx, struct gck_mntns *ns, const char *path)
{
	if (mkdir(path, 0755) == -1) {
		if (errno == EEXIST)
			return GCK_OK;
		return gck_set_syserr(ctx, errno, "cannot make the job's "
		    "cgroup '%s': %s", path, strerror(errno));
	}
	if (made_add(ns, path) == -1) {
		(void)rmdir(path);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	return GCK_OK;
}

/*
 * A restore that failed: the cgroups it made for the tree go, the
 * newest first, each once the tree's processes have left it (a killed
 * process leaves it as it is reaped).
 */
void
gck_mntns_unmake(struct gck_mntns *ns)
{
	size_t	i;
	int	tries;

	if (ns == NULL)
		return;
	for (i = ns->nmade; i-- > 0; ) {
		for (tries = 0; rmdir(ns->made[i]) == -1 && errno == EBUSY &&
		    tries < 100; tries++)
			usleep(10000);
		free(ns->made[i]);
	}
	free(ns->made);
	ns->made = NULL;
	ns->nmade = 0;
}

/*
 * A cgroup controller the tree had mounted (a container's) is of no
 * host file, and may be taken from the image: where its source is a
 * cgroup of this host's mount of that file system, it is made if
 * missing, and *okp set.  Returns GCK_OK or a code.
 */
static int
cgroup_here(struct gck_ctx *ctx, struct gck_mntns *ns,
    const struct gck_mntns_bind *b, int *okp)
{
	struct gck_mounts	*ours = NULL;
	const struct gck_mount	*m;
	char			 path[PATH_MAX], *p;
	size_t			 i, len;
	int			 r;

	*okp = 0;
	if (strcmp(b->fstype, "cgroup") != 0 &&
	    strcmp(b->fstype, "cgroup2") != 0)
		return GCK_OK;
	if (strstr(b->source, "/../") != NULL ||
	    (len = strlen(b->source)) >= sizeof path ||
	    (len >= 3 && strcmp(b->source + len - 3, "/..") == 0))
		return GCK_OK;
	if ((r = gck_mountinfo_read(ctx, getpid(), &ours)) != GCK_OK)
		return r;
	for (i = 0; i < ours->n; i++) {
		m = &ours->m[i];
		len = strlen(m->at);
		if (strcmp(m->fstype, b->fstype) != 0 || strcmp(m->root, "/") ||
		    strncmp(b->source, m->at, len) != 0 ||
		    (b->source[len] != '/' && b->source[len] != '\0'))
			continue;
		/* mkdir -p, under that mount only. */
		snprintf(path, sizeof path, "%s", b->source);
		for (p = path + len + 1; p <= path + strlen(path); p++)
			if (*p == '/' || *p == '\0') {
				char c = *p;

				*p = '\0';
				if (p > path + len &&
				    (r = make_cgroup(ctx, ns, path)) != GCK_OK) {
					gck_mounts_free(ours);
					return r;
				}
				*p = c;
			}
		*okp = 1;
		break;
	}
	gck_mounts_free(ours);
	return GCK_OK;
}

/*
 * The minor number of the NVIDIA device node at path here (a character
 * device of the driver's major 195, or of a major /proc/devices gives an
 * nvidia driver: nvidia-uvm, nvidia-caps), or -1 when path is none.
 */
static int
nvidia_node(const char *path)
{
	struct stat	 sb;
	FILE		*f;
	char		 line[128], name[64];
	unsigned int	 maj;
	int		 found = 0;

	if (stat(path, &sb) == -1 || !S_ISCHR(sb.st_mode))
		return -1;
	if (major(sb.st_rdev) == GCK_NVIDIA_MAJOR)
		return (int)minor(sb.st_rdev);
	if ((f = fopen("/proc/devices", "re")) == NULL)
		return -1;
	/* Only its character devices: the list up to "Block devices:". */
	while (!found && fgets(line, sizeof line, f) != NULL &&
	    strncmp(line, "Block", 5) != 0)
		found = sscanf(line, "%u %63s", &maj, name) == 2 &&
		    maj == major(sb.st_rdev) && strncmp(name, "nvidia", 6) == 0;
	fclose(f);
	return found ? (int)minor(sb.st_rdev) : -1;
}

/*
 * An NVIDIA device node bound into the job (/dev/nvidia0, /dev/nvidiactl,
 * as the NVIDIA container toolkit binds them) is bound from this host's
 * node at the same path without being named: any process here may open
 * it, as the driver makes it, so the image gains nothing by it.  The
 * node of a GPU (/dev/nvidiaN, N its minor number) follows the GPU map:
 * the job's GPU of minor N restored onto the GPU of minor M here, it is
 * bound from the node of minor M, the path's number replaced, which must
 * be here.  Sets *srcp (in buf) and *okp when b is such a node.
 * Returns GCK_OK or a code.
 */
static int
nvidia_here(struct gck_ctx *ctx, const struct gck_mntns_bind *b,
    const struct gck_mntns_where *w, char *buf, size_t len,
    const char **srcp, int *okp)
{
	size_t	i, n = strlen(b->source), k = n;
	int	minor;

	if (*okp || (minor = nvidia_node(b->source)) == -1)
		return GCK_OK;
	*okp = 1;
	if (minor >= GCK_NVIDIA_CTL_MINOR)
		return GCK_OK;		/* nvidiactl, nvidia-modeset... */
	for (i = 0; i < w->ndevs && w->devs[i][0] != minor; i++)
		;
	if (i == w->ndevs || w->devs[i][1] == minor)
		return GCK_OK;
	while (k > 0 && b->source[k - 1] >= '0' && b->source[k - 1] <= '9')
		k--;
	if (k == n || k == 0 || (size_t)snprintf(buf, len, "%.*s%d", (int)k,
	    b->source, w->devs[i][1]) >= len || nvidia_node(buf) !=
	    w->devs[i][1])
		return gck_set_error(ctx, GCK_EINVAL, "the job's GPU of "
		    "device node '%s' (minor %d) is restored onto the GPU of "
		    "minor %d, whose device node is not here beside it: name "
		    "it yourself (--mount-map %s=NODE)", b->source, minor,
		    w->devs[i][1], b->at);
	gck_log(ctx, 1, "the job's %s: %s, as its GPU is mapped", b->at, buf);
	*srcp = buf;
	return GCK_OK;
}

/*
 * Settles where each mount of ns comes from here (w), checks that each
 * source may be used and is here, and opens the files outside the
 * namespace as they were opened; fills ns->args with criu restore's
 * options for them (the files, from descriptor w->firstfd on, in
 * ns->fds).  Returns GCK_OK or a code, with one line saying what is
 * amiss.
 */
int
gck_mntns_plan(struct gck_ctx *ctx, struct gck_mntns *ns,
    const struct gck_mntns_where *w)
{
	char		 spec[PATH_MAX + 80], nvpath[PATH_MAX];
	const char	*src, *eq;
	size_t		 i, j;
	int		 named, fd, flags, r;

	for (i = 0; i < w->nmap; i++) {
		if (w->map[i][0] != '/' || (eq = strchr(w->map[i], '=')) ==
		    NULL || eq[1] != '/')
			return gck_set_error(ctx, GCK_EINVAL, "--mount-map "
			    "'%s': not AT=SOURCE, both absolute paths",
			    w->map[i]);
		for (j = 0; j < ns->nb && (strncmp(ns->b[j].at, w->map[i],
		    (size_t)(eq - w->map[i])) != 0 ||
		    ns->b[j].at[eq - w->map[i]] != '\0'); j++)
			;
		if (j == ns->nb)
			return gck_set_error(ctx, GCK_EINVAL, "--mount-map "
			    "'%s': the image has no mount from the host at "
			    "'%.*s'", w->map[i], (int)(eq - w->map[i]),
			    w->map[i]);
	}
	src = w->root != NULL ? w->root : ns->root;
	if ((r = source_ok(ctx, "/", src, w->root != NULL ||
	    w->trusted)) != GCK_OK || add_arg(ns, "--root", src) == -1)
		return r != GCK_OK ? r : gck_set_error(ctx, GCK_ENOMEM,
		    "out of memory");
	for (i = 0; i < ns->nb; i++) {
		if ((src = map_of(w, ns->b[i].at, &named)) == NULL) {
			src = ns->b[i].source;
			if ((r = cgroup_here(ctx, ns, &ns->b[i], &named)) !=
			    GCK_OK || (r = nvidia_here(ctx, &ns->b[i], w,
			    nvpath, sizeof nvpath, &src, &named)) != GCK_OK)
				return r;
		}
		if ((r = source_ok(ctx, ns->b[i].at, src,
		    named || w->trusted)) != GCK_OK)
			return r;
		snprintf(spec, sizeof spec, "mnt[%s]:%s", ns->b[i].key, src);
		if (add_arg(ns, "--external", spec) == -1)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	if ((ns->fds = calloc(ns->nf + 1, sizeof *ns->fds)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < ns->nf; i++) {
		ns->fds[i] = -1;
		flags = (ns->f[i].flags & (O_ACCMODE | O_APPEND | O_NONBLOCK |
		    O_DIRECTORY)) | O_NOCTTY | O_CLOEXEC;
		if ((fd = open(ns->f[i].path, flags)) == -1)
			return gck_set_syserr(ctx, errno, "process %d of the "
			    "image had '%s' open on fd %d, outside its mount "
			    "namespace, which cannot be opened here: %s",
			    (int)ns->f[i].pid, ns->f[i].path, ns->f[i].fd,
			    strerror(errno));
		ns->fds[ns->nfds++] = fd;
		if (!(flags & O_APPEND) && ns->f[i].pos > 0)
			(void)lseek(fd, (off_t)ns->f[i].pos, SEEK_SET);
		snprintf(spec, sizeof spec, "fd[%d]:%s", w->firstfd + (int)i,
		    ns->f[i].key);
		if (add_arg(ns, "--inherit-fd", spec) == -1)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	return GCK_OK;
}

/* What settle_rec learns of files.img: the external files it names. */
struct settle {
	struct gck_mntns	*ns;
	char			*used;	/* per ns->f: named in the image */
	size_t			 n;	/* records that lost their size */
};

/*
 * A regular file of files.img that criu was told is external (a file
 * outside the namespace, which criu names by its key) loses its size:
 * criu would refuse a restore of a log that has grown since, and the
 * file is the host's, as a pipe's other end is.  Which files the image
 * names is noted.
 */
static int
settle_rec(struct gck_ctx *ctx, const uint8_t *rec, size_t len, void *arg,
    uint8_t **outp, size_t *outlenp)
{
	struct settle	*st = arg;
	FileEntry	*fe;
	size_t		 i;
	int		 r = GCK_OK;

	*outp = NULL;
	if ((fe = file_entry__unpack(NULL, len, rec)) == NULL)
		return GCK_OK;		/* as it was */
	/* criu names such a file by its key: file[MNTID:INO]. */
	if (fe->reg != NULL && fe->reg->name != NULL &&
	    strncmp(fe->reg->name, "file[", 5) == 0) {
		for (i = 0; i < st->ns->nf; i++)
			if (strcmp(st->ns->f[i].key, fe->reg->name) == 0)
				st->used[i] = 1;
		if (fe->reg->has_size) {
			fe->reg->has_size = 0;
			*outlenp = file_entry__get_packed_size(fe);
			if ((*outp = malloc(*outlenp + 1)) == NULL)
				r = gck_set_error(ctx, GCK_ENOMEM,
				    "out of memory");
			else {
				file_entry__pack(fe, *outp);
				st->n++;
			}
		}
	}
	file_entry__free_unpacked(fe, NULL);
	return r;
}

/*
 * Each external file of ns as the stopped tree t has it: its offset and
 * flags now, not when the tree was scanned running, on the first
 * descriptor that has it.
 */
static void
settle_fds(struct gck_mntns *ns, const struct gck_ptree *t)
{
	struct gck_mntns_file	*f;
	struct fd_seen		 s;
	struct dirent		*de;
	DIR			*d;
	char			 path[64], *seen, *p;
	size_t			 i;
	int			 fd;

	if ((seen = calloc(ns->nf + 1, 1)) == NULL)
		return;			/* as scanned */
	for (i = 0; i < t->n; i++) {
		snprintf(path, sizeof path, "/proc/%d/fd", (int)t->procs[i].pid);
		if ((d = opendir(path)) == NULL)
			continue;
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			fd = atoi(de->d_name);
			if (!fd_read(t->procs[i].pid, fd, &s) ||
			    (f = file_of(ns, s.key)) == NULL ||
			    seen[f - ns->f])
				continue;
			seen[f - ns->f] = 1;
			if ((p = strdup(s.link)) == NULL)
				continue;
			free(f->path);
			f->path = p;
			f->flags = s.flags;
			f->pos = s.pos;
			f->pid = t->procs[i].pid;
			f->fd = fd;
		}
		closedir(d);
	}
	free(seen);
}

/*
 * Once criu has dumped tree t of namespace ns, the tree still stopped:
 * the image records the external files criu named, and only those (a
 * descriptor may have been closed since the scan), each as the stopped
 * tree has it, without its size in files.img; the process of each is
 * named as the PID namespace of a whole container (view) names it.
 * Returns GCK_OK or a code.
 */
int
gck_mntns_settle(struct gck_ctx *ctx, struct gck_mntns *ns,
    struct gck_capture *cap, const struct gck_ptree *t,
    const struct gck_nsview *view)
{
	const struct gck_sfile	*ff;
	struct settle		 st;
	size_t			 i, j;
	int			 r;

	if (ns == NULL || ns->nf == 0)
		return GCK_OK;
	memset(&st, 0, sizeof st);
	st.ns = ns;
	if ((st.used = calloc(ns->nf, 1)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if ((ff = gck_capture_find(cap, "files.img")) != NULL && !ff->pages &&
	    (r = gck_img_rewrite(ctx, cap, ff, &st, settle_rec)) != GCK_OK) {
		free(st.used);
		return r;
	}
	for (i = j = 0; i < ns->nf; i++) {
		if (!st.used[i]) {
			free(ns->f[i].path);
			continue;
		}
		ns->f[j++] = ns->f[i];
	}
	free(st.used);
	gck_log(ctx, 2, "image: %zu of %zu file%s outside the mount "
	    "namespace still open, %zu recorded without a size", j, ns->nf,
	    ns->nf == 1 ? "" : "s", st.n);
	ns->nf = j;
	settle_fds(ns, t);
	if (ns->whole)
		for (i = 0; i < ns->nf; i++)
			ns->f[i].pid = gck_nsview_local(view, ns->f[i].pid);
	return GCK_OK;
}
