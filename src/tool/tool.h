/*
 * tool.h: what the gpuckpt binaries share: diagnostics, signals, numbers.
 */
#ifndef GCK_TOOL_H
#define GCK_TOOL_H

#include <signal.h>
#include <stdint.h>

struct gck_ctx;
struct gck_stats;

extern volatile sig_atomic_t	tool_signal;

/* Makes a context logging to stderr at verbosity; exits 1 if out of memory. */
struct gck_ctx	*tool_ctx(int);
/* Catches SIGINT, SIGTERM and SIGHUP into tool_signal; ignores SIGPIPE. */
void		 tool_signals(void);
/*
 * Parses a number from min to max; exits 2 with a message naming what
 * when it is not one.
 */
long long	 tool_number(const char *, long long, long long, const char *);
/* Parses a PID; exits 2 with a message when it is not one. */
pid_t		 tool_pid(const char *);
/* Parses a size, N or N followed by K, M, G or T (1024s); exits 2 if bad. */
uint64_t	 tool_size(const char *, const char *);
/* Parses zstd, zstd:LEVEL or none into a level (0: none); -1 if bad. */
int		 tool_compress(const char *);
/*
 * Parses seconds ("10", "2.5") from 0 to max into milliseconds; -1 with
 * a message naming what if bad.
 */
long		 tool_seconds(const char *, const char *, long);
/*
 * Opens the image to read: path, or standard input for NULL or "-".
 * Exits with status and a message when it cannot, or when standard
 * input is a terminal.  Returns the descriptor.
 */
int		 tool_open_image(const char *, int);
/* Appends s to the list *vp of *np strings; exits 1 when out of memory. */
void		 tool_append(char ***, size_t *, char *);
/*
 * Prints "PROG (gpuckpt) VERSION", the licence and the warranty lines on
 * stdout and exits 0.
 */
_Noreturn void	 tool_version(void);
/*
 * usage(): with status 0 prints synopsis and help on stdout and exits 0;
 * else prints synopsis and "Try 'PROG --help'" on stderr and exits
 * status.  synopsis holds its lines, each ending in a newline.
 */
_Noreturn void	 tool_usage(int, const char *, const char *);
/*
 * A usage error: "PROG: fmt..." on stderr, then the synopsis as
 * tool_usage() prints it; exits 2.
 */
_Noreturn void	 tool_usage_error(const char *, const char *, ...)
		    __attribute__((__format__(__printf__, 2, 3)));
/*
 * Says, if pid > 0, that process pid wrote to terminal tty on fd, which
 * becomes /dev/null on restore.
 */
void		 tool_tty_note(pid_t, const char *, int);

/*
 * Shows the progress of ctx's work on stderr, a line rewritten in place,
 * when stderr is a terminal and quiet is 0.
 */
void		 tool_progress(struct gck_ctx *, int);
/* Clears the progress line, if one is shown, for other output. */
void		 tool_progress_clear(void);
/*
 * --stats[=text|json]: the form asked for (TOOL_STATS_*), or -1 with a
 * message when arg is neither.
 */
/* The lines of --help for the options every program, or three, share. */
#define TOOL_HELP_QUIET_STATS \
    "  -q, --quiet              no progress line and no notes\n" \
    "      --stats[=text|json]  print what was done on standard error " \
    "(text)\n"
#define TOOL_HELP_COMMON \
    "  -v, --verbose            more messages; repeat for more detail\n" \
    "  -h, --help               print this help and exit\n" \
    "  -V, --version            print the version and exit\n"

#define TOOL_STATS_TEXT		1
#define TOOL_STATS_JSON		2
int		 tool_stats_form(const char *);
/*
 * Prints st on stderr in form, the fields that the TOOL_ST_* bits of
 * which name, and extra's (a JSON object, may be NULL) after them.
 */
#define TOOL_ST_SENT		0x1u	/* sent_bytes */
#define TOOL_ST_ZERO		0x2u	/* zero_bytes */
#define TOOL_ST_FREEZE		0x4u	/* freeze_ms */
#define TOOL_ST_RESTORE		0x8u	/* freeze_ms as restore_ms */
#define TOOL_ST_MEMORY		0x10u	/* memory_bytes, unchanged_bytes */
struct json_t;
void		 tool_stats(const struct gck_stats *, int, unsigned int,
		    struct json_t *);
/* "1.2 GiB": n bytes in buf of len. */
void		 tool_human(uint64_t, char *, size_t);

#endif /* GCK_TOOL_H */
