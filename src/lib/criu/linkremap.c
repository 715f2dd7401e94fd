/*
 * linkremap.c: the files criu links back into their directories travel
 * in the image, or by another of their names.
 *
 * A process may hold open a file whose name is gone while the file
 * keeps another name: glibc's sem_open() makes a POSIX semaphore under
 * a name of its own and links it to the semaphore's name, so that the
 * mapping of every semaphore of Python's multiprocessing (started with
 * "spawn") is of a name that no longer exists.  criu cannot open such a
 * file by its path on restore, and with --link-remap, which gpuckpt
 * always gives, it links the file back into its directory as
 * link_remap.ID, its files.img entry ID, and records that link in
 * remap-fpath.img (remap_type LINKED).  That link is of no use to a
 * restore on another host, would be left behind on this one, and
 * criu removes it itself when it lets the tree run, so that an image
 * taken with -R could not be restored at all.
 *
 * So, once criu has dumped the tree and before the image is written,
 * each such file is made one a restore finds anywhere:
 * - where the tree also holds the same file open under a name that
 *   exists (the children of a "spawn" start open the semaphore by its
 *   name), the file is opened by that name, as those processes do, and
 *   shared with them again on restore: its files.img entry takes that
 *   name (and mount) and its remap goes;
 * - else the file travels in the image as a deleted one would, a ghost
 *   file (ghost-file-ID.img, its bytes after its record), which criu
 *   creates again on restore and deletes once the tree has it open; the
 *   remap becomes a GHOST remap.  Every remap of one file shares one
 *   ghost, as it shared the file.
 * The link criu made is removed at once, whatever happens next: the
 * tree's own descriptors keep the file.  A file that is not regular, or
 * whose link cannot be opened, is left as criu recorded it.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/proc.h"
#include "core/util.h"
#include "criu/linkremap.h"
#include "criu/pagemap.h"
#include "criu/streamer.h"
#include "criu/criu-images.pb-c.h"

#define REMAP_FPATH	"remap-fpath.img"
#define FILES		"files.img"
#define REMAP_FPATH_MAGIC	0x59133954u	/* criu/include/magic.h */
#define GHOST_FILE_MAGIC	0x52583605u
#define FD_TYPE_REG	1		/* criu's fd_types */
#define REMAP_LINKED	0		/* criu's remap_type */
#define REMAP_GHOST	1
#define LINK_PREFIX	"link_remap."

/* A file criu linked back, and what becomes of it. */
struct lrm {
	uint32_t	 orig;		/* files.img id of the file opened */
	uint32_t	 link;		/* ... and of criu's link */
	char		*path;		/* the link, as the tree sees it */
	dev_t		 dev;
	ino_t		 ino;
	int		 fd;		/* the link, open; -1 */
	int		 keep;		/* left as criu recorded it */
	uint32_t	 ghost;		/* its ghost's id, or 0 */
	uint32_t	 named;		/* else a files.img id of the same
					   file under a name that exists */
};

/* The work: the remaps, the files.img entries. */
struct lrs {
	struct gck_ctx	*ctx;
	char		 root[64];	/* what the tree's "/" is here */
	struct lrm	*m;
	size_t		 n, cap;
	FileEntry	**fe;
	size_t		 nfe, capfe;
	uint32_t	 maxghost;
};

static int	 lrs_remaps(struct lrs *, const struct gck_sfile *);
static int	 lrs_files(struct lrs *, const struct gck_sfile *);
static const FileEntry *lrs_file(const struct lrs *, uint32_t);
static int	 lrs_open(struct lrs *, struct lrm *);
static void	 lrs_named(struct lrs *, struct lrm *);
static int	 lrs_limit(struct lrs *, const struct lrm *, uint64_t);
static int	 lrs_ghost(struct lrs *, struct gck_capture *, struct lrm *);
static int	 lrs_put(struct gck_ctx *, char **, size_t *, size_t *,
		    const void *, size_t);
static int	 lrs_remap_rec(struct gck_ctx *, const uint8_t *, size_t,
		    void *, uint8_t **, size_t *);
static int	 lrs_file_rec(struct gck_ctx *, const uint8_t *, size_t,
		    void *, uint8_t **, size_t *);
static void	 lrs_unlink(struct lrs *);
static void	 lrs_free(struct lrs *);

/* Appends len bytes at p to the growing buffer *bufp. */
static int
lrs_put(struct gck_ctx *ctx, char **bufp, size_t *lenp, size_t *capp,
    const void *p, size_t len)
{
	size_t	 cap;
	char	*n;

	if (*capp - *lenp < len) {
		cap = *capp > 0 ? *capp : 4096;
		while (cap - *lenp < len)
			cap *= 2;
		if ((n = realloc(*bufp, cap)) == NULL)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		*bufp = n;
		*capp = cap;
	}
	memcpy(*bufp + *lenp, p, len);
	*lenp += len;
	return GCK_OK;
}

/* The LINKED remaps of remap-fpath.img, and the largest ghost id. */
static int
lrs_remaps(struct lrs *s, const struct gck_sfile *f)
{
	RemapFilePathEntry	*e;
	const uint8_t		*rec;
	uint32_t		 rl;
	size_t			 pos;
	int			 bad, r;

	if (gck_img_start(f->data, f->len, REMAP_FPATH_MAGIC, &pos) == -1)
		return gck_set_error(s->ctx, GCK_ECRIU, "criu wrote a '%s' "
		    "that does not parse", f->name);
	while ((rec = gck_img_record(f->data, f->len, &pos, &rl, &bad)) !=
	    NULL) {
		if ((e = remap_file_path_entry__unpack(NULL, rl, rec)) == NULL)
			return gck_set_error(s->ctx, GCK_ECRIU, "criu wrote a "
			    "'%s' that does not parse", f->name);
		if (e->has_remap_type && e->remap_type == REMAP_GHOST &&
		    e->remap_id > s->maxghost)
			s->maxghost = e->remap_id;
		if (!e->has_remap_type || e->remap_type == REMAP_LINKED) {
			if ((r = gck_grow(s->ctx, &s->m, &s->cap, s->n,
			    sizeof *s->m)) != GCK_OK) {
				remap_file_path_entry__free_unpacked(e, NULL);
				return r;
			}
			memset(&s->m[s->n], 0, sizeof s->m[s->n]);
			s->m[s->n].orig = e->orig_id;
			s->m[s->n].link = e->remap_id;
			s->m[s->n++].fd = -1;
		}
		remap_file_path_entry__free_unpacked(e, NULL);
	}
	if (bad)
		return gck_set_error(s->ctx, GCK_ECRIU, "criu wrote a '%s' "
		    "that ends inside a record", f->name);
	return GCK_OK;
}

/* Every entry of files.img, kept unpacked. */
static int
lrs_files(struct lrs *s, const struct gck_sfile *f)
{
	FileEntry	*fe;
	const uint8_t	*rec;
	uint32_t	 rl;
	size_t		 pos;
	int		 bad, r;

	if (gck_img_start(f->data, f->len, GCK_FILES_MAGIC, &pos) == -1)
		return gck_set_error(s->ctx, GCK_ECRIU, "criu wrote a '%s' "
		    "that does not parse", f->name);
	while ((rec = gck_img_record(f->data, f->len, &pos, &rl, &bad)) !=
	    NULL) {
		if ((fe = file_entry__unpack(NULL, rl, rec)) == NULL)
			return gck_set_error(s->ctx, GCK_ECRIU, "criu wrote a "
			    "'%s' that does not parse", f->name);
		if ((r = gck_grow(s->ctx, &s->fe, &s->capfe, s->nfe,
		    sizeof *s->fe)) != GCK_OK) {
			file_entry__free_unpacked(fe, NULL);
			return r;
		}
		s->fe[s->nfe++] = fe;
	}
	if (bad)
		return gck_set_error(s->ctx, GCK_ECRIU, "criu wrote a '%s' "
		    "that ends inside a record", f->name);
	return GCK_OK;
}

/* The regular file of files.img with id, or NULL. */
static const FileEntry *
lrs_file(const struct lrs *s, uint32_t id)
{
	size_t	i;

	for (i = 0; i < s->nfe; i++)
		if (s->fe[i]->has_id && s->fe[i]->id == id &&
		    s->fe[i]->has_type && s->fe[i]->type == FD_TYPE_REG &&
		    s->fe[i]->reg != NULL && s->fe[i]->reg->name != NULL)
			return s->fe[i];
	return NULL;
}

/*
 * Opens criu's link of m: a regular file named link_remap.ID, its
 * entry's id, as criu names them.  Leaves m kept as criu recorded it
 * when it is not one.
 */
static int
lrs_open(struct lrs *s, struct lrm *m)
{
	const FileEntry	*fe;
	const char	*base;
	char		 want[32];
	struct stat	 sb;

	m->keep = 1;
	if ((fe = lrs_file(s, m->link)) == NULL || lrs_file(s, m->orig) ==
	    NULL || fe->reg->name[0] != '/')
		return GCK_OK;
	base = strrchr(fe->reg->name, '/') + 1;
	snprintf(want, sizeof want, LINK_PREFIX "%" PRIu32, m->link);
	if (strcmp(base, want) != 0)
		return GCK_OK;
	if (asprintf(&m->path, "%s%s", s->root, fe->reg->name) == -1) {
		m->path = NULL;
		return gck_set_error(s->ctx, GCK_ENOMEM, "out of memory");
	}
	if ((m->fd = open(m->path, O_RDONLY | O_NOFOLLOW | O_NOCTTY |
	    O_CLOEXEC)) == -1) {
		gck_log(s->ctx, 1, "cannot open '%s', which criu linked: %s",
		    m->path, strerror(errno));
		return GCK_OK;
	}
	if (fstat(m->fd, &sb) == -1 || !S_ISREG(sb.st_mode)) {
		close(m->fd);
		m->fd = -1;
		return GCK_OK;
	}
	m->dev = sb.st_dev;
	m->ino = sb.st_ino;
	m->keep = 0;
	return GCK_OK;
}

/*
 * Whether the tree holds m's file open under a name that exists, as
 * a regular file of files.img that is no remap's: that entry's id in
 * m->named.
 */
static void
lrs_named(struct lrs *s, struct lrm *m)
{
	const RegFileEntry	*reg;
	struct stat		 sb;
	char			 path[PATH_MAX];
	size_t			 i, k;
	int			 remapped;

	for (i = 0; i < s->nfe; i++) {
		if (!s->fe[i]->has_type || s->fe[i]->type != FD_TYPE_REG ||
		    (reg = s->fe[i]->reg) == NULL || reg->name == NULL ||
		    reg->name[0] != '/')
			continue;
		for (k = 0, remapped = 0; k < s->n; k++)
			if (s->m[k].orig == s->fe[i]->id ||
			    s->m[k].link == s->fe[i]->id)
				remapped = 1;
		if (remapped || (size_t)snprintf(path, sizeof path, "%s%s",
		    s->root, reg->name) >= sizeof path ||
		    stat(path, &sb) == -1 || sb.st_dev != m->dev ||
		    sb.st_ino != m->ino)
			continue;
		m->named = s->fe[i]->id;
		return;
	}
}

/* Refuses a file too large to travel in the image. */
static int
lrs_limit(struct lrs *s, const struct lrm *m, uint64_t limit)
{
	struct stat	sb;

	if (fstat(m->fd, &sb) == -1)
		return gck_set_syserr(s->ctx, errno, "cannot stat '%s': %s",
		    m->path, strerror(errno));
	if ((uint64_t)sb.st_size <= limit)
		return GCK_OK;
	return gck_set_error(s->ctx, GCK_EINVAL, "a process of the tree holds "
	    "open '%s', whose name is gone while another name of it remains "
	    "outside the tree, and its %" PRIu64 " bytes are more than the "
	    "ghost limit lets into the image (1 MiB unless --ghost-limit says "
	    "more): give --ghost-limit %" PRIu64 " or more",
	    lrs_file(s, m->orig)->reg->name, (uint64_t)sb.st_size,
	    (uint64_t)sb.st_size);
}

/*
 * Makes m's file a ghost of the image, or gives it the ghost another
 * remap of the same file made.
 */
static int
lrs_ghost(struct lrs *s, struct gck_capture *cap, struct lrm *m)
{
	GhostFileEntry	 g = GHOST_FILE_ENTRY__INIT;
	Timeval		 at = TIMEVAL__INIT, mt = TIMEVAL__INIT;
	struct stat	 sb;
	char		 name[GCK_SNAME], buf[65536];
	char		*out = NULL;
	uint8_t		*rec = NULL;
	uint32_t	 rl, magic[2] = { GCK_IMG_COMMON_MAGIC,
			    GHOST_FILE_MAGIC };
	uint64_t	 left;
	size_t		 i, len = 0, ocap = 0;
	ssize_t		 n;
	int		 r;

	for (i = 0; i < s->n; i++)
		if (&s->m[i] != m && s->m[i].ghost != 0 &&
		    s->m[i].dev == m->dev && s->m[i].ino == m->ino) {
			m->ghost = s->m[i].ghost;
			return GCK_OK;
		}
	if (fstat(m->fd, &sb) == -1)
		return gck_set_syserr(s->ctx, errno, "cannot stat '%s': %s",
		    m->path, strerror(errno));
	g.uid = sb.st_uid;
	g.gid = sb.st_gid;
	g.mode = sb.st_mode;
	g.has_dev = g.has_ino = 1;
	g.dev = (uint32_t)sb.st_dev;
	g.ino = sb.st_ino;
	at.tv_sec = (uint64_t)sb.st_atim.tv_sec;
	at.tv_usec = (uint64_t)sb.st_atim.tv_nsec / 1000;
	mt.tv_sec = (uint64_t)sb.st_mtim.tv_sec;
	mt.tv_usec = (uint64_t)sb.st_mtim.tv_nsec / 1000;
	g.atim = &at;
	g.mtim = &mt;
	rl = (uint32_t)ghost_file_entry__get_packed_size(&g);
	if ((rec = malloc(rl)) == NULL)
		return gck_set_error(s->ctx, GCK_ENOMEM, "out of memory");
	ghost_file_entry__pack(&g, rec);
	if ((r = lrs_put(s->ctx, &out, &len, &ocap, magic, sizeof magic)) !=
	    GCK_OK || (r = lrs_put(s->ctx, &out, &len, &ocap, &rl,
	    sizeof rl)) != GCK_OK || (r = lrs_put(s->ctx, &out, &len, &ocap,
	    rec, rl)) != GCK_OK)
		goto out;
	for (left = (uint64_t)sb.st_size; left > 0; left -= (uint64_t)n) {
		n = pread(m->fd, buf, left < sizeof buf ? (size_t)left :
		    sizeof buf, (off_t)((uint64_t)sb.st_size - left));
		if (n == -1 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (n <= 0) {
			r = gck_set_syserr(s->ctx, n == 0 ? EIO : errno,
			    "cannot read '%s': %s", m->path, n == 0 ?
			    "it shrank" : strerror(errno));
			goto out;
		}
		if ((r = lrs_put(s->ctx, &out, &len, &ocap, buf, (size_t)n)) !=
		    GCK_OK)
			goto out;
	}
	m->ghost = ++s->maxghost;
	snprintf(name, sizeof name, "ghost-file-%" PRIx32 ".img", m->ghost);
	r = gck_capture_add_file(cap, name, out, len);
	out = NULL;
out:
	free(out);
	free(rec);
	return r;
}

/*
 * A record of remap-fpath.img again: a remap of a file given its other
 * name goes, one made a ghost is one, the rest are as they were.
 */
static int
lrs_remap_rec(struct gck_ctx *ctx, const uint8_t *rec, size_t len,
    void *arg, uint8_t **outp, size_t *outlenp)
{
	struct lrs		*s = arg;
	RemapFilePathEntry	*e;
	const struct lrm	*m;
	size_t			 k;
	int			 r = GCK_OK;

	*outp = NULL;
	if ((e = remap_file_path_entry__unpack(NULL, len, rec)) == NULL)
		return gck_set_error(ctx, GCK_ECRIU, "criu wrote a '%s' that "
		    "does not parse", REMAP_FPATH);
	for (k = 0, m = NULL; k < s->n; k++)
		if (!s->m[k].keep && s->m[k].orig == e->orig_id &&
		    s->m[k].link == e->remap_id && (!e->has_remap_type ||
		    e->remap_type == REMAP_LINKED))
			m = &s->m[k];
	if (m != NULL) {
		e->has_remap_type = 1;
		e->remap_type = REMAP_GHOST;
		e->remap_id = m->ghost;
		*outlenp = m->named != 0 ? 0 :
		    remap_file_path_entry__get_packed_size(e);
		if ((*outp = malloc(*outlenp + 1)) == NULL)
			r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		else if (*outlenp > 0)
			remap_file_path_entry__pack(e, *outp);
	}
	remap_file_path_entry__free_unpacked(e, NULL);
	return r;
}

/*
 * A record of files.img again: the entry of criu's link of a file made
 * anything else goes, and that of a file given its other name takes
 * that name and mount; every other entry is as criu wrote it.
 */
static int
lrs_file_rec(struct gck_ctx *ctx, const uint8_t *rec, size_t len,
    void *arg, uint8_t **outp, size_t *outlenp)
{
	struct lrs		*s = arg;
	const FileEntry		*other;
	const struct lrm	*m = NULL;
	FileEntry		*fe;
	char			*oname = NULL;
	size_t			 k;
	int32_t			 omnt = 0;
	int			 drop = 0, hasmnt = 0, r = GCK_OK;

	*outp = NULL;
	if ((fe = file_entry__unpack(NULL, len, rec)) == NULL)
		return GCK_OK;		/* read already: as it was */
	for (k = 0; fe->has_id && k < s->n; k++) {
		if (s->m[k].keep)
			continue;
		if (fe->id == s->m[k].link)
			drop = 1;
		else if (fe->id == s->m[k].orig && s->m[k].named != 0 &&
		    fe->reg != NULL)
			m = &s->m[k];
	}
	if (m != NULL && !drop) {
		/* The other's name and mount, lent while fe is packed. */
		other = lrs_file(s, m->named);
		oname = fe->reg->name;
		omnt = fe->reg->mnt_id;
		hasmnt = fe->reg->has_mnt_id;
		fe->reg->name = other->reg->name;
		fe->reg->has_mnt_id = other->reg->has_mnt_id;
		fe->reg->mnt_id = other->reg->mnt_id;
	}
	if (drop || m != NULL) {
		*outlenp = drop ? 0 : file_entry__get_packed_size(fe);
		if ((*outp = malloc(*outlenp + 1)) == NULL)
			r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		else if (*outlenp > 0)
			file_entry__pack(fe, *outp);
	}
	if (m != NULL && !drop) {
		fe->reg->name = oname;
		fe->reg->mnt_id = omnt;
		fe->reg->has_mnt_id = hasmnt;
	}
	file_entry__free_unpacked(fe, NULL);
	return r;
}

/* Removes criu's links that were opened: the tree holds their files. */
static void
lrs_unlink(struct lrs *s)
{
	size_t	i;

	for (i = 0; i < s->n; i++)
		if (s->m[i].fd != -1 && unlink(s->m[i].path) == -1 &&
		    errno != ENOENT)
			gck_log(s->ctx, 1, "cannot remove '%s', which criu "
			    "linked: %s", s->m[i].path, strerror(errno));
}

static void
lrs_free(struct lrs *s)
{
	size_t	i;

	for (i = 0; i < s->n; i++) {
		if (s->m[i].fd != -1)
			close(s->m[i].fd);
		free(s->m[i].path);
	}
	free(s->m);
	for (i = 0; i < s->nfe; i++)
		file_entry__free_unpacked(s->fe[i], NULL);
	free(s->fe);
}

/*
 * Makes each file of the dump in cap that criu linked back into its
 * directory one a restore finds anywhere (see above), and removes
 * criu's links, even on failure.  root is the tree's root process, as
 * we see it, ns whether the tree has a mount namespace of its own (where
 * criu ran, and its paths are); limit the largest file that may travel
 * in the image.  Returns GCK_OK with *ghostsp and *namedp, the files so
 * made ghosts and given another name, or a code.
 */
int
gck_link_remaps(struct gck_ctx *ctx, struct gck_capture *cap, pid_t root,
    int ns, uint64_t limit, size_t *ghostsp, size_t *namedp)
{
	const struct gck_sfile	*rf, *ff;
	struct lrs		 s;
	size_t			 i;
	int			 r;

	*ghostsp = *namedp = 0;
	if ((rf = gck_capture_find(cap, REMAP_FPATH)) == NULL || rf->pages)
		return GCK_OK;
	memset(&s, 0, sizeof s);
	s.ctx = ctx;
	if (ns)
		snprintf(s.root, sizeof s.root, "/proc/%d/root", (int)root);
	if ((r = lrs_remaps(&s, rf)) != GCK_OK || s.n == 0)
		goto out;
	if ((ff = gck_capture_find(cap, FILES)) == NULL || ff->pages) {
		r = gck_set_error(ctx, GCK_ECRIU, "criu wrote '%s' and no "
		    "'%s'", REMAP_FPATH, FILES);
		goto out;
	}
	if ((r = lrs_files(&s, ff)) != GCK_OK)
		goto out;
	for (i = 0; i < s.n; i++)
		if ((r = lrs_open(&s, &s.m[i])) != GCK_OK)
			goto out;
	for (i = 0; i < s.n; i++) {
		if (s.m[i].keep)
			continue;
		lrs_named(&s, &s.m[i]);
		if (s.m[i].named != 0) {
			(*namedp)++;
			continue;
		}
		if ((r = lrs_limit(&s, &s.m[i], limit)) != GCK_OK ||
		    (r = lrs_ghost(&s, cap, &s.m[i])) != GCK_OK)
			goto out;
		(*ghostsp)++;
	}
	/* (The capture's files move as files are added: find them again.) */
	if ((r = gck_img_rewrite(ctx, cap, gck_capture_find(cap, REMAP_FPATH),
	    &s, lrs_remap_rec)) != GCK_OK || (r = gck_img_rewrite(ctx, cap,
	    gck_capture_find(cap, FILES), &s, lrs_file_rec)) != GCK_OK)
		goto out;
	for (i = 0; i < s.n; i++)
		if (s.m[i].keep)
			gck_log(ctx, 1, "criu's link of file %" PRIu32 " kept "
			    "as it made it", s.m[i].orig);
out:
	lrs_unlink(&s);
	lrs_free(&s);
	return r;
}
