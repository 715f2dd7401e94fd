/*
 * Unit tests for criu.c: the command lines of criu dump and criu restore.
 */

#include "config.h"

#include <sys/types.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "private.h"
#include "criu/criu.h"

#define CRIU	"/opt/criu/sbin/criu"	/* $GCK_CRIU, criu's path */

static void	assert_argv(struct gck_criu_cmd *, const char *const []);
static void	t_dump_stopped(void **);
static void	t_dump_running(void **);
static void	t_dump_options(void **);
static void	t_restore_files(void **);
static void	t_restore_stream(void **);

/* The command line of cmd is criu, then want (NULL-ended). */
static void
assert_argv(struct gck_criu_cmd *cmd, const char *const want[])
{
	int	argc, i;

	argc = gck_criu_argv(cmd);
	assert_true(argc < GCK_CRIU_ARGV);
	assert_string_equal(cmd->argv[0], CRIU);
	for (i = 1; want[i - 1] != NULL; i++) {
		assert_true(i < argc);
		assert_string_equal(cmd->argv[i], want[i - 1]);
	}
	assert_int_equal(i, argc);
	assert_null(cmd->argv[argc]);
}

static void
t_dump_stopped(void **state)
{
	struct gck_criu_cmd	 cmd = { .imgdir = "/w/img", .pid = 4242,
	    .stream = 1, .action = "/usr/bin/gpuckpt" };
	const char *const	 want[] = { "dump", "-t", "4242", "-D",
	    "/w/img", "-o", "-", "-v4", "--leave-stopped", "--stream",
	    "--action-script", "/usr/bin/gpuckpt", NULL };

	(void)state;
	assert_argv(&cmd, want);
}

static void
t_dump_running(void **state)
{
	struct gck_criu_cmd	 cmd = { .imgdir = "/w/img", .pid = 7,
	    .shell_job = 1, .leave_running = 1, .stream = 1,
	    .action = "/x/gpusend" };
	const char *const	 want[] = { "dump", "-t", "7", "-D", "/w/img",
	    "-o", "-", "-v4", "--leave-running", "--stream",
	    "--action-script", "/x/gpusend", "--shell-job", NULL };

	(void)state;
	assert_argv(&cmd, want);
}

/* Each GCK_CRIU_* bit is its option, in the order of the bits. */
static void
t_dump_options(void **state)
{
	struct gck_criu_cmd	 cmd = { .imgdir = "d", .pid = 1,
	    .stream = 1, .action = "a" };
	const char *const	 all[] = { "dump", "-t", "1", "-D", "d", "-o",
	    "-", "-v4", "--leave-stopped", "--stream", "--action-script",
	    "a", "--tcp-established", "--ext-unix-sk", "--file-locks",
	    "--tcp-close", NULL };
	const char *const	 locks[] = { "dump", "-t", "1", "-D", "d",
	    "-o", "-", "-v4", "--leave-stopped", "--stream",
	    "--action-script", "a", "--shell-job", "--file-locks", NULL };
	const char *const	 unix_sk[] = { "dump", "-t", "1", "-D", "d",
	    "-o", "-", "-v4", "--leave-stopped", "--stream",
	    "--action-script", "a", "--ext-unix-sk", NULL };

	(void)state;
	cmd.opts = GCK_CRIU_OPTS_ALL;
	assert_argv(&cmd, all);
	cmd.opts = GCK_CRIU_FILE_LOCKS;
	cmd.shell_job = 1;
	assert_argv(&cmd, locks);
	cmd.opts = GCK_CRIU_EXT_UNIX_SK;
	cmd.shell_job = 0;
	assert_argv(&cmd, unix_sk);
}

static void
t_restore_files(void **state)
{
	struct gck_criu_cmd	 cmd = { .restore = 1, .imgdir = "/w/img",
	    .shell_job = 1, .opts = GCK_CRIU_TCP_ESTABLISHED };
	const char *const	 want[] = { "restore", "-d",
	    "--manage-cgroups=ignore", "-D", "/w/img",
	    "-o", "-", "-v4", "--leave-stopped", "--shell-job",
	    "--tcp-established", NULL };

	(void)state;
	assert_argv(&cmd, want);
}

/*
 * A dump's other options: the TCP connections locked with nftables,
 * link remaps, the ghost limit; none of them on a restore.
 */
static void
t_dump_extra(void **state)
{
	struct gck_criu_cmd	 cmd = { .imgdir = "d", .pid = 1,
	    .stream = 1, .action = "a", .opts = GCK_CRIU_TCP_ESTABLISHED,
	    .nft = 1, .link_remap = 1, .ghost_limit = 5u << 20 };
	const char *const	 want[] = { "dump", "-t", "1", "-D", "d", "-o",
	    "-", "-v4", "--leave-stopped", "--stream", "--action-script",
	    "a", "--tcp-established", "--network-lock", "nftables",
	    "--link-remap", "--ghost-limit", "5242880", NULL };
	const char *const	 rwant[] = { "restore", "-d",
	    "--manage-cgroups=ignore", "-D", "d", "-o", "-", "-v4",
	    "--leave-stopped", "--tcp-established", NULL };

	(void)state;
	assert_argv(&cmd, want);
	cmd.restore = 1;
	cmd.stream = 0;
	cmd.action = NULL;
	assert_argv(&cmd, rwant);
}

/*
 * --tcp-close on a restore takes the place of --tcp-established, and
 * only where the image has it.
 */
static void
t_restore_tcp_close(void **state)
{
	struct gck_criu_cmd	 cmd = { .restore = 1, .imgdir = "/w/img",
	    .opts = GCK_CRIU_OPTS_ALL, .tcp_close = 1 };
	const char *const	 want[] = { "restore", "-d",
	    "--manage-cgroups=ignore", "-D", "/w/img",
	    "-o", "-", "-v4", "--leave-stopped", "--ext-unix-sk",
	    "--file-locks", "--tcp-close", NULL };
	const char *const	 without[] = { "restore", "-d",
	    "--manage-cgroups=ignore", "-D", "/w/img",
	    "-o", "-", "-v4", "--leave-stopped", "--file-locks", NULL };

	const char *const	 dumped[] = { "restore", "-d",
	    "--manage-cgroups=ignore", "-D", "/w/img",
	    "-o", "-", "-v4", "--leave-stopped", "--tcp-close", NULL };

	(void)state;
	assert_argv(&cmd, want);
	cmd.opts = GCK_CRIU_FILE_LOCKS;
	assert_argv(&cmd, without);
	/* An image dumped with --tcp-close needs it, asked for or not. */
	cmd.opts = GCK_CRIU_TCP_CLOSE;
	assert_argv(&cmd, dumped);
	cmd.tcp_close = 0;
	assert_argv(&cmd, dumped);
}

static void
t_restore_stream(void **state)
{
	struct gck_criu_cmd	 cmd = { .restore = 1, .imgdir = "/w/img",
	    .stream = 1 };
	const char *const	 want[] = { "restore", "-d",
	    "--manage-cgroups=ignore", "-D", "/w/img",
	    "-o", "-", "-v4", "--leave-stopped", "--stream", NULL };

	(void)state;
	assert_argv(&cmd, want);
}

int
main(void)
{
	static const struct CMUnitTest	tests[] = {
		cmocka_unit_test(t_dump_stopped),
		cmocka_unit_test(t_dump_running),
		cmocka_unit_test(t_dump_options),
		cmocka_unit_test(t_restore_files),
		cmocka_unit_test(t_restore_stream),
		cmocka_unit_test(t_dump_extra),
		cmocka_unit_test(t_restore_tcp_close),
	};

	if (setenv("GCK_CRIU", CRIU, 1) == -1)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
