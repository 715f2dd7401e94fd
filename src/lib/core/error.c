/*
 * error.c: the context, its error carrier and its log sink.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"

struct gck_ctx *
gck_ctx_new(void)
{
	return calloc(1, sizeof(struct gck_ctx));
}

void
gck_ctx_free(struct gck_ctx *ctx)
{
	free(ctx);
}

const char *
gck_version(void)
{
	return PACKAGE_VERSION;
}

/*
 * Notes what a success is to be told with: something the caller did not
 * ask for but must know, such as where a tree went.
 */
void
gck_set_notice(struct gck_ctx *ctx, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(ctx->notice, sizeof ctx->notice, fmt, ap);
	va_end(ap);
}

const char *
gck_notice_string(const struct gck_ctx *ctx)
{
	return ctx->notice[0] != '\0' ? ctx->notice : NULL;
}

const char *
gck_error_string(const struct gck_ctx *ctx)
{
	if (ctx == NULL || ctx->code == GCK_OK)
		return NULL;
	return ctx->msg;
}

int
gck_error_code(const struct gck_ctx *ctx)
{
	return ctx->code;
}

int
gck_errno(const struct gck_ctx *ctx)
{
	return ctx->code == GCK_ESYS ? ctx->oerrno : 0;
}

void
gck_set_log(struct gck_ctx *ctx, void (*fn)(void *, int, const char *),
    void *arg, int level)
{
	ctx->logfn = fn;
	ctx->logarg = arg;
	ctx->loglevel = level;
}

void
gck_set_interrupt(struct gck_ctx *ctx, volatile sig_atomic_t *flag)
{
	ctx->intr = flag;
}

/*
 * Records code, errno e and message on ctx, a new error: from here, the
 * tree's fate unsaid.  A system error always carries its errno (EIO if
 * none was said).  Returns code.
 */
static int
set_error(struct gck_ctx *ctx, int code, int e, const char *fmt, va_list ap)
{
	ctx->code = code;
	ctx->oerrno = code != GCK_ESYS ? 0 : e != 0 ? e : EIO;
	ctx->origin = GCK_FROM_HERE;
	ctx->fate = GCK_FATE_UNSAID;
	vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
	return code;
}

/*
 * Records code and message on ctx.  Returns code, so that
 * "return gck_set_error(...)" reads as it should.
 */
int
gck_set_error(struct gck_ctx *ctx, int code, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	code = set_error(ctx, code, 0, fmt, ap);
	va_end(ap);
	return code;
}

/* As gck_set_error(), recording the errno value e as well. */
int
gck_set_syserr(struct gck_ctx *ctx, int e, const char *fmt, ...)
{
	va_list	ap;
	int	r;

	va_start(ap, fmt);
	r = set_error(ctx, GCK_ESYS, e, fmt, ap);
	va_end(ap);
	return r;
}

/*
 * Adds to the current error: text (fmt) before its message, at fate
 * GCK_FATE_UNSAID, or "; " and text after it, which then says what
 * became of the process tree.  Code, errno and origin stay as they are.
 * Returns the code.
 */
static int
error_add(struct gck_ctx *ctx, int fate, const char *fmt, va_list ap)
{
	char	add[GCK_ERRMAX], msg[GCK_ERRMAX];
	size_t	len, tail;

	vsnprintf(add, sizeof add, fmt, ap);
	len = strlen(ctx->msg);
	if (fate == GCK_FATE_UNSAID) {
		tail = len - (ctx->fate != GCK_FATE_UNSAID ? ctx->fate_at : len);
		memcpy(msg, ctx->msg, len + 1);
		snprintf(ctx->msg, sizeof ctx->msg, "%s", add);
		len = strlen(ctx->msg);
		snprintf(ctx->msg + len, sizeof ctx->msg - len, "%s", msg);
		/* The fate's text, if any, still ends the message. */
		if (ctx->fate != GCK_FATE_UNSAID)
			ctx->fate_at = strlen(ctx->msg) >= tail ?
			    strlen(ctx->msg) - tail : 0;
		return ctx->code;
	}
	snprintf(ctx->msg + len, sizeof ctx->msg - len, "; %s", add);
	ctx->fate = (enum gck_fate)fate;
	ctx->fate_at = len;
	return ctx->code;
}

/*
 * The one way to add to the current error (see private.h's
 * gck_error_prefix() and gck_error_fate()): text before its message, at
 * fate GCK_FATE_UNSAID, else "; " and text after it, telling what became
 * of the process tree.  Returns the code.
 */
int
gck_error_add(struct gck_ctx *ctx, enum gck_fate fate, const char *fmt, ...)
{
	va_list	ap;
	int	r;

	va_start(ap, fmt);
	r = error_add(ctx, fate, fmt, ap);
	va_end(ap);
	return r;
}

/* Records where the current error came from.  Returns its code. */
int
gck_error_from(struct gck_ctx *ctx, enum gck_origin origin)
{
	ctx->origin = origin;
	return ctx->code;
}

/* The end of the message that tells the tree's fate ("; ..."), or "". */
const char *
gck_error_fate_text(const struct gck_ctx *ctx)
{
	if (ctx->fate == GCK_FATE_UNSAID || ctx->fate_at > strlen(ctx->msg))
		return "";
	return ctx->msg + ctx->fate_at;
}

void
gck_log(struct gck_ctx *ctx, int level, const char *fmt, ...)
{
	char	buf[GCK_ERRMAX];
	va_list	ap;

	if (ctx->logfn == NULL || level > ctx->loglevel)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ctx->logfn(ctx->logarg, level, buf);
}

/* Returns the signal number that interrupted us, or 0. */
int
gck_interrupted(struct gck_ctx *ctx)
{
	return ctx->intr != NULL ? (int)*ctx->intr : 0;
}

/* Returns GCK_EINTR (with its message) when interrupted, else GCK_OK. */
int
gck_check_interrupt(struct gck_ctx *ctx)
{
	int	sig;

	if ((sig = gck_interrupted(ctx)) == 0)
		return GCK_OK;
	return gck_set_error(ctx, GCK_EINTR, "interrupted by %s",
	    gck_signame(sig));
}

const char *
gck_signame(int sig)
{
	switch (sig) {
	case SIGINT:
		return "SIGINT";
	case SIGTERM:
		return "SIGTERM";
	case SIGHUP:
		return "SIGHUP";
	case SIGPIPE:
		return "SIGPIPE";
	default:
		return "a signal";
	}
}
