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
 * Records code and message on ctx.  Returns code, so that
 * "return gck_set_error(...)" reads as it should.
 */
int
gck_set_error(struct gck_ctx *ctx, int code, const char *fmt, ...)
{
	va_list	ap;

	ctx->code = code;
	ctx->oerrno = 0;
	va_start(ap, fmt);
	vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
	va_end(ap);
	return code;
}

/* As gck_set_error(), recording the errno value e as well. */
int
gck_set_syserr(struct gck_ctx *ctx, int e, const char *fmt, ...)
{
	va_list	ap;

	ctx->code = GCK_ESYS;
	ctx->oerrno = e;
	va_start(ap, fmt);
	vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
	va_end(ap);
	return GCK_ESYS;
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
