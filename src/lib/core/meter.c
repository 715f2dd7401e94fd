/*
 * meter.c: progress reports through the context, and the times of the
 * stages that struct gck_stats keeps.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "private.h"

static void	meter_call(struct gck_ctx *, int64_t);

void
gck_ctx_set_progress(struct gck_ctx *ctx,
    void (*fn)(void *, const struct gck_progress *), void *arg)
{
	memset(&ctx->meter, 0, sizeof ctx->meter);
	ctx->meter.fn = fn;
	ctx->meter.arg = arg;
}

/* Microseconds on the monotonic clock. */
int64_t
gck_clock_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Milliseconds from microsecond from to to, rounded, never below 0. */
uint64_t
gck_stats_ms(int64_t from, int64_t to)
{
	return to > from ? (uint64_t)(to - from + 500) / 1000 : 0;
}

/* Tells fn where the stage is, now being at now_us. */
static void
meter_call(struct gck_ctx *ctx, int64_t now_us)
{
	ctx->meter.due_us = now_us + GCK_PROGRESS_MS * 1000;
	ctx->meter.fn(ctx->meter.arg, &ctx->meter.p);
}

/*
 * Starts stage (a static string) of total bytes (0: not known), its
 * bytes from 0, and says so at once; unless a caller holds the meter.
 */
void
gck_meter_stage(struct gck_ctx *ctx, const char *stage, uint64_t total)
{
	if (ctx->meter.fn == NULL || ctx->meter.held)
		return;
	ctx->meter.p.stage = stage;
	ctx->meter.p.bytes = 0;
	ctx->meter.p.total = total;
	meter_call(ctx, gck_clock_us());
}

/*
 * As gck_meter_stage(), and keeps the stage, whatever the layers below
 * call theirs, until gck_meter_release(): gpusend's "sending" spans the
 * checkpoint that writes what it sends.
 */
void
gck_meter_hold(struct gck_ctx *ctx, const char *stage, uint64_t total)
{
	ctx->meter.held = 0;
	gck_meter_stage(ctx, stage, total);
	ctx->meter.held = 1;
}

void
gck_meter_release(struct gck_ctx *ctx)
{
	ctx->meter.held = 0;
}

/*
 * Counts n more bytes of the stage.  The clock is read only on every
 * sixteenth call, or for a large n: a call costs an addition.
 */
void
gck_meter_add(struct gck_ctx *ctx, uint64_t n)
{
	static _Thread_local unsigned	tick;
	int64_t				now;

	if (ctx->meter.fn == NULL)
		return;
	ctx->meter.p.bytes += n;
	if ((++tick & 15) != 0 && n < (1u << 20))
		return;
	if ((now = gck_clock_us()) >= ctx->meter.due_us)
		meter_call(ctx, now);
}

/*
 * Ends a stage of st: name took from *markp until now, which becomes
 * the mark of the next.
 */
void
gck_stats_stage(struct gck_stats *st, const char *name, int64_t *markp)
{
	int64_t	now = gck_clock_us();

	if (st != NULL && st->nstages < GCK_STAGES_MAX) {
		st->stages[st->nstages].name = name;
		st->stages[st->nstages++].ms = gck_stats_ms(*markp, now);
	}
	*markp = now;
}
