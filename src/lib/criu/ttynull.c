/*
 * ttynull.c: the terminals of a tree, in its image, become /dev/null.
 *
 * A job started from an interactive shell has the shell's terminal on
 * its standard input (`cmd >log 2>&1 &`), often on its output too, and
 * a subshell keeps it on a descriptor of its own.  criu dumps such a
 * descriptor as the terminal it is, and can restore it only onto a
 * terminal of the restoring session, which a detached restore, on this
 * host or another, does not have.  So the image says /dev/null there
 * instead, as nohup(1) does for a terminal: in files.img each file
 * open on a terminal becomes a regular file open on /dev/null with the
 * same flags and owner, in each fdinfo-N.img the descriptors that name
 * it name it as one, and tty-info.img forgets those terminals.  The
 * restored job reads end of file there, and what it writes is dropped.
 *
 * The rewriting works on criu's own records (see criu-images.proto):
 * what it does not change is copied byte for byte.
 */
#include "config.h"

#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "criu/pagemap.h"
#include "criu/streamer.h"
#include "criu/ttynull.h"
#include "criu/criu-images.pb-c.h"

#define FD_TYPE_REG	1	/* criu's fd_types */
#define FD_TYPE_TTY	11
#define DEV_NULL	"/dev/null"

/* The terminals found, by file id and by tty-info id. */
struct ttys {
	uint32_t	*ids, *infos;
	size_t		 n, cap;
};


static int
has(const uint32_t *set, size_t n, uint32_t v)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (set[i] == v)
			return 1;
	return 0;
}

/*
 * A record of files.img: a file open on a terminal comes back as one
 * open on /dev/null (in *outp, *outlenp: malloc'ed), noted in t; any
 * other, as NULL (copied as it is).  Returns GCK_OK or a code.
 */
static int
file_rec(struct gck_ctx *ctx, const uint8_t *rec, size_t len, void *arg,
    uint8_t **outp, size_t *outlenp)
{
	struct ttys	*t = arg;
	FileEntry	*fe, nfe = FILE_ENTRY__INIT;
	RegFileEntry	 reg = REG_FILE_ENTRY__INIT;
	FownEntry	 fown = FOWN_ENTRY__INIT;
	int		 r;

	*outp = NULL;
	if ((fe = file_entry__unpack(NULL, len, rec)) == NULL)
		return gck_set_error(ctx, GCK_ECRIU, "criu wrote a files.img "
		    "that does not parse");
	if (!fe->has_type || fe->type != FD_TYPE_TTY) {
		file_entry__free_unpacked(fe, NULL);
		return GCK_OK;
	}
	if (fe->tty == NULL || !fe->has_id) {
		file_entry__free_unpacked(fe, NULL);
		return gck_set_error(ctx, GCK_ECRIU, "criu wrote a terminal "
		    "file without its terminal");
	}
	if (t->n == t->cap) {
		size_t	 nc = t->cap ? t->cap * 2 : 8;
		void	*a, *b;

		a = reallocarray(t->ids, nc, sizeof *t->ids);
		if (a != NULL)
			t->ids = a;
		b = reallocarray(t->infos, nc, sizeof *t->infos);
		if (b != NULL)
			t->infos = b;
		if (a == NULL || b == NULL) {
			file_entry__free_unpacked(fe, NULL);
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		}
		t->cap = nc;
	}
	t->ids[t->n] = fe->id;
	t->infos[t->n++] = fe->tty->tty_info_id;
	if (fe->tty->fown != NULL)
		fown = *fe->tty->fown;
	fown.base.unknown_fields = NULL;
	fown.base.n_unknown_fields = 0;
	fown.has_uid = fown.has_euid = fown.has_signum = 1;
	fown.has_pid_type = fown.has_pid = 1;
	reg.has_id = reg.has_flags = reg.has_pos = 1;
	reg.id = fe->id;
	reg.flags = fe->tty->flags;
	reg.pos = 0;
	reg.fown = &fown;
	reg.name = DEV_NULL;
	nfe.has_type = nfe.has_id = 1;
	nfe.type = FD_TYPE_REG;
	nfe.id = fe->id;
	nfe.reg = &reg;
	*outlenp = file_entry__get_packed_size(&nfe);
	if ((*outp = malloc(*outlenp)) == NULL)
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	else {
		file_entry__pack(&nfe, *outp);
		r = GCK_OK;
	}
	file_entry__free_unpacked(fe, NULL);
	return r;
}

/* A record of fdinfo-N.img: a terminal's descriptor names a file. */
static int
fdinfo_rec(struct gck_ctx *ctx, const uint8_t *rec, size_t len, void *arg,
    uint8_t **outp, size_t *outlenp)
{
	struct ttys	*t = arg;
	FdinfoEntry	*fi;
	int		 r = GCK_OK;

	*outp = NULL;
	if ((fi = fdinfo_entry__unpack(NULL, len, rec)) == NULL)
		return gck_set_error(ctx, GCK_ECRIU, "criu wrote an fdinfo "
		    "image that does not parse");
	if (fi->has_type && fi->type == FD_TYPE_TTY &&
	    has(t->ids, t->n, fi->id)) {
		fi->type = FD_TYPE_REG;
		*outlenp = fdinfo_entry__get_packed_size(fi);
		if ((*outp = malloc(*outlenp)) == NULL)
			r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		else
			fdinfo_entry__pack(fi, *outp);
	}
	fdinfo_entry__free_unpacked(fi, NULL);
	return r;
}

/* A record of tty-info.img: a terminal no file names any more goes. */
static int
ttyinfo_rec(struct gck_ctx *ctx, const uint8_t *rec, size_t len, void *arg,
    uint8_t **outp, size_t *outlenp)
{
	struct ttys	*t = arg;
	TtyInfoEntry	*ti;
	int		 gone;

	*outp = NULL;
	if ((ti = tty_info_entry__unpack(NULL, len, rec)) == NULL)
		return gck_set_error(ctx, GCK_ECRIU, "criu wrote a tty-info "
		    "image that does not parse");
	gone = ti->has_id && has(t->infos, t->n, ti->id);
	tty_info_entry__free_unpacked(ti, NULL);
	if (gone) {
		/* Nothing in its place: an empty, malloc'ed record. */
		*outlenp = 0;
		if ((*outp = malloc(1)) == NULL)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		**outp = 0;
	}
	return GCK_OK;
}

/*
 * Makes every descriptor of the image in cap that is open on a terminal
 * open on /dev/null.  Returns GCK_OK with *np the number of terminal
 * files so made, or a code.
 */
int
gck_ttys_to_null(struct gck_ctx *ctx, struct gck_capture *cap, size_t *np)
{
	const struct gck_sfile	*f;
	struct ttys		 t;
	size_t			 i, n;
	int			 r;

	*np = 0;
	memset(&t, 0, sizeof t);
	if ((f = gck_capture_find(cap, "files.img")) == NULL) {
		r = GCK_OK;	/* no file at all */
		goto out;
	}
	if ((r = gck_img_rewrite(ctx, cap, f, &t, file_rec)) != GCK_OK ||
	    t.n == 0)
		goto out;
	n = gck_capture_nfiles(cap);
	for (i = 0; i < n; i++) {
		f = gck_capture_file(cap, i);
		if (strncmp(f->name, "fdinfo-", 7) == 0 &&
		    (r = gck_img_rewrite(ctx, cap, f, &t, fdinfo_rec)) != GCK_OK)
			goto out;
	}
	if ((f = gck_capture_find(cap, "tty-info.img")) != NULL &&
	    (r = gck_img_rewrite(ctx, cap, f, &t, ttyinfo_rec)) != GCK_OK)
		goto out;
	*np = t.n;
	r = GCK_OK;
out:
	free(t.ids);
	free(t.infos);
	return r;
}
