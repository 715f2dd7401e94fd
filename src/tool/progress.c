/*
 * progress.c: the progress line and the --stats report of gpuckpt,
 * gpurestore and gpusend, both on stderr.
 */
#include "config.h"

#include <sys/types.h>

#include <err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "compat.h"
#include "gpuckpt.h"
#include "tool.h"

/* The line shown, and where its stage began. */
static struct {
	const char	*stage;
	struct timespec	 t0;
	size_t		 width;		/* of the line shown, 0: none */
} line;

static void	progress_show(void *, const struct gck_progress *);
static double	since(const struct timespec *);
static void	stats_text(const struct gck_stats *, unsigned int, json_t *);
static json_t	*stats_json(const struct gck_stats *, unsigned int);

void
tool_human(uint64_t n, char *buf, size_t len)
{
	static const char	*units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double			 v = (double)n;
	size_t			 i;

	if (n < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)n);
		return;
	}
	for (i = 0, v /= 1024; v >= 1024 && i + 1 < sizeof units /
	    sizeof units[0]; i++)
		v /= 1024;
	snprintf(buf, len, v < 10 ? "%.1f %s" : "%.0f %s", v, units[i]);
}

/* Seconds since t0. */
static double
since(const struct timespec *t0)
{
	struct timespec	now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) +
	    (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* gck_ctx_set_progress()'s: rewrites the line with where p is. */
static void
progress_show(void *arg, const struct gck_progress *p)
{
	char	buf[160], done[32], all[32], rate[32];
	double	secs;
	int	n;

	(void)arg;
	if (line.stage != p->stage) {
		line.stage = p->stage;
		clock_gettime(CLOCK_MONOTONIC, &line.t0);
	}
	tool_human(p->bytes, done, sizeof done);
	secs = since(&line.t0);
	rate[0] = '\0';
	if (secs >= 0.2 && p->bytes > 0) {
		tool_human((uint64_t)((double)p->bytes / secs), rate,
		    sizeof rate - 2);
		strcat(rate, "/s");
	}
	if (p->total > 0) {
		tool_human(p->total, all, sizeof all);
		n = snprintf(buf, sizeof buf, "%s: %-9s %9s of %s %3d%%  %s",
		    getprogname(), p->stage, done, all, (int)(p->bytes >=
		    p->total ? 100 : p->bytes * 100 / p->total), rate);
	} else
		n = snprintf(buf, sizeof buf, "%s: %-9s %9s  %s",
		    getprogname(), p->stage, done, rate);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof buf)
		n = sizeof buf - 1;
	/* Spaces wipe what a longer line before left. */
	fprintf(stderr, "\r%s%*s", buf, line.width > (size_t)n ?
	    (int)(line.width - (size_t)n) : 0, "");
	fflush(stderr);
	line.width = (size_t)n;
}

void
tool_progress(struct gck_ctx *ctx, int quiet)
{
	if (quiet || !isatty(STDERR_FILENO))
		return;
	gck_ctx_set_progress(ctx, progress_show, NULL);
}

void
tool_progress_clear(void)
{
	if (line.width == 0)
		return;
	fprintf(stderr, "\r%*s\r", (int)line.width, "");
	fflush(stderr);
	line.width = 0;
}

int
tool_stats_form(const char *arg)
{
	if (arg == NULL || strcmp(arg, "text") == 0)
		return TOOL_STATS_TEXT;
	if (strcmp(arg, "json") == 0)
		return TOOL_STATS_JSON;
	warnx("invalid --stats '%s': use text or json", arg);
	return -1;
}

/* The fields of st that which names, as one JSON object. */
static json_t *
stats_json(const struct gck_stats *st, unsigned int which)
{
	json_t	*j, *stages;
	size_t	 i;
	int	 bad = 0;

	if ((j = json_object()) == NULL || (stages = json_object()) == NULL) {
		json_decref(j);
		return NULL;
	}
#define SET(k, v)	(bad |= json_object_set_new(j, (k), \
			    json_integer((json_int_t)(v))))
	if (which & TOOL_ST_MEMORY)
		SET("memory_bytes", st->memory_bytes);
	SET("image_bytes", st->image_bytes);
	if (which & TOOL_ST_SENT)
		SET("sent_bytes", st->sent_bytes);
	if (which & TOOL_ST_MEMORY)
		SET("unchanged_bytes", st->unchanged_bytes);
	if (which & TOOL_ST_ZERO)
		SET("zero_bytes", st->zero_bytes);
	if (which & TOOL_ST_FREEZE)
		SET("freeze_ms", st->freeze_ms);
	if (which & TOOL_ST_RESTORE)
		SET("restore_ms", st->freeze_ms);
	SET("total_ms", st->total_ms);
#undef SET
	for (i = 0; i < st->nstages; i++)
		bad |= json_object_set_new(stages, st->stages[i].name,
		    json_integer((json_int_t)st->stages[i].ms));
	bad |= json_object_set_new(j, "stages_ms", stages);
	if (bad) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* One "name value" line for each of the fields of j, stages last. */
static void
stats_text(const struct gck_stats *st, unsigned int which, json_t *j)
{
	const char	*k;
	json_t		*v;
	char		 h[32];
	size_t		 i;

	(void)which;
	json_object_foreach(j, k, v) {
		if (strcmp(k, "stages_ms") == 0 || json_is_object(v) ||
		    json_is_array(v))
			continue;
		if (json_is_integer(v) && strstr(k, "bytes") != NULL &&
		    json_integer_value(v) >= 1024) {
			tool_human((uint64_t)json_integer_value(v), h,
			    sizeof h);
			fprintf(stderr, "%-16s %lld (%s)\n", k,
			    (long long)json_integer_value(v), h);
		} else if (json_is_integer(v))
			fprintf(stderr, "%-16s %lld\n", k,
			    (long long)json_integer_value(v));
		else if (json_is_string(v))
			fprintf(stderr, "%-16s %s\n", k, json_string_value(v));
		else if (json_is_null(v))
			fprintf(stderr, "%-16s -\n", k);
		else
			fprintf(stderr, "%-16s %s\n", k, json_is_true(v) ?
			    "true" : "false");
	}
	fprintf(stderr, "%-16s", "stages_ms");
	for (i = 0; i < st->nstages; i++)
		fprintf(stderr, "%s %s %llu", i ? "," : "",
		    st->stages[i].name, (unsigned long long)st->stages[i].ms);
	fputc('\n', stderr);
}

void
tool_stats(const struct gck_stats *st, int form, unsigned int which,
    json_t *extra)
{
	json_t	*j;

	tool_progress_clear();
	if ((j = stats_json(st, which)) == NULL || (extra != NULL &&
	    json_object_update(j, extra) != 0)) {
		warnx("out of memory");
		json_decref(j);
		return;
	}
	if (form == TOOL_STATS_JSON) {
		if (json_dumpf(j, stderr, JSON_COMPACT) == 0)
			fputc('\n', stderr);
	} else
		stats_text(st, which, j);
	fflush(stderr);
	json_decref(j);
}
