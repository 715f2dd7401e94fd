/*
 * private.h: internals of libgpuckpt.  Not for use outside src/lib.
 */
#ifndef GCK_PRIVATE_H
#define GCK_PRIVATE_H

#ifndef GCK_BUILDING_LIB
#error "private.h is internal to libgpuckpt"
#endif

#include <stdarg.h>

#include "gpuckpt.h"

#define GCK_ERRMAX	1024
#define GCK_TAR_RECORD	10240		/* tar blocking of the writer */
#define GCK_SPOOL_SUFFIX ".gpu"	/* the work directory's, of device memory */

/*
 * Whether an entry's digest differs from the one recorded for it.  The
 * fuzzing build (make fuzz) takes any digest, so that the fuzzer's
 * mutated entries are parsed on rather than all refused at their first
 * part; no other build defines FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION.
 */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define GCK_DIGEST_DIFFERS(a, b)	((void)(a), (void)(b), 0)
#else
#define GCK_DIGEST_DIFFERS(a, b)	((a) != (b))
#endif

/*
 * Where a failure came from, for whoever must tell the cases apart: a
 * message is for people, never parsed.
 */
enum gck_origin {
	GCK_FROM_HERE = 0,	/* this host */
	GCK_FROM_SSH,		/* the SSH connection to the remote */
	GCK_FROM_REMOTE,	/* the remote end (gpurecv) said so */
	GCK_FROM_HANDOVER	/* the hand-over between the two */
};

/* What a failure left of the process tree, as its message ends. */
enum gck_fate {
	GCK_FATE_UNSAID = 0,	/* the message does not say */
	GCK_FATE_RUNNING,	/* left running (or resumed) */
	GCK_FATE_STOPPED,	/* left stopped */
	GCK_FATE_KILLED,	/* killed */
	GCK_FATE_KEPT		/* ended, its image kept for a restore */
};

struct gck_ctx {
	int			 code;
	int			 oerrno;	/* with GCK_ESYS, always set */
	char			 msg[GCK_ERRMAX];
	enum gck_origin		 origin;
	enum gck_fate		 fate;
	size_t			 fate_at;	/* msg + fate_at: "; ..." */
	void			(*logfn)(void *, int, const char *);
	void			*logarg;
	int			 loglevel;
	volatile sig_atomic_t	*intr;
	char			 notice[GCK_ERRMAX];	/* for a success */
	struct gck_meter {
		void		(*fn)(void *, const struct gck_progress *);
		void		*arg;
		struct gck_progress p;
		int64_t		 due_us;	/* the next call, at the soonest */
		int		 held;		/* the stage stays as it is */
	}			 meter;
};

/* error.c */
void	gck_set_notice(struct gck_ctx *, const char *, ...)
	    __attribute__((__format__(__printf__, 2, 3)));
int	gck_set_error(struct gck_ctx *, int, const char *, ...)
	    __attribute__((__format__(__printf__, 3, 4)));
int	gck_set_syserr(struct gck_ctx *, int, const char *, ...)
	    __attribute__((__format__(__printf__, 3, 4)));
int	gck_error_add(struct gck_ctx *, enum gck_fate, const char *, ...)
	    __attribute__((__format__(__printf__, 3, 4)));
/* Puts text before the message of the current error ("local: ..."). */
#define gck_error_prefix(ctx, ...) \
	gck_error_add((ctx), GCK_FATE_UNSAID, __VA_ARGS__)
/*
 * Ends the message of the current error with what became of the process
 * tree ("...; process tree 12 left running"), and records it (fate is
 * one of GCK_FATE_RUNNING...).
 */
#define gck_error_fate(ctx, fate, ...) \
	gck_error_add((ctx), (fate), __VA_ARGS__)
int	gck_error_from(struct gck_ctx *, enum gck_origin);
const char *gck_error_fate_text(const struct gck_ctx *);
void	gck_log(struct gck_ctx *, int, const char *, ...)
	    __attribute__((__format__(__printf__, 3, 4)));
int	gck_interrupted(struct gck_ctx *);
int	gck_check_interrupt(struct gck_ctx *);
const char *gck_signame(int);

/* meter.c: progress, and the stage times of struct gck_stats */
void	gck_meter_stage(struct gck_ctx *, const char *, uint64_t);
void	gck_meter_hold(struct gck_ctx *, const char *, uint64_t);
void	gck_meter_release(struct gck_ctx *);
void	gck_meter_add(struct gck_ctx *, uint64_t);
int64_t	gck_clock_us(void);
void	gck_stats_stage(struct gck_stats *, const char *, int64_t *);
uint64_t gck_stats_ms(int64_t, int64_t);

#endif /* GCK_PRIVATE_H */
