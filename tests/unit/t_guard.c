/*
 * Unit tests for the guard (core/guard.c): a process tree is stopped
 * as gpuckpt stops it, the process that started the guard dies without
 * a word, and the guard is to settle the tree as it was told and remove
 * the work directory and the partial output file.
 *
 * The test is a child subreaper, so that the guard, orphaned when its
 * parent dies, and the processes of a killed tree come back to it.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "private.h"
#include "core/guard.h"
#include "core/proc.h"
#include "unit.h"

#define NPROC		3		/* the root and two children */
#define WAIT_MS		5000

/* How the guarding process ends. */
enum death {
	DIE,			/* without a word */
	DIE_RENAMED,		/* the same, once the output has its name */
	DIE_CRIU,		/* the same, while "criu" runs on 600 ms */
	SETTLED			/* after gck_guard_free() */
};

struct tree {
	pid_t	pids[NPROC];	/* pids[0] is the root */
};

static int	guard_setup(void **);
static int	guard_teardown(void **);
static void	tree_start(struct tree *);
static void	tree_end(struct tree *);
static int	wait_state(pid_t, int, int);
static int	reap(pid_t, int, int *);
static off_t	file_size(const char *);
static void	gpu_mark(struct gck_ctx *, const struct gck_proc *, size_t,
		    const char *);
static void	guarding(const struct unit *, const struct tree *, char,
		    enum death, int);
static void	run_guard(const struct unit *, const struct tree *, char,
		    enum death);
static void	assert_running(pid_t);
static void	assert_stopped(pid_t);
static void	assert_killed(pid_t);
static void	assert_gone(const char *);
static void	assert_exists(const char *);
static void	test_resume(void **);
static void	test_waits_for_criu(void **);
static void	test_kill(void **);
static void	test_stay_stopped(void **);
static void	test_prestopped(void **);
static void	test_late_intent_rolls_back(void **);
static void	test_late_intent_renamed(void **);
static void	test_settled(void **);

static struct tree	cur;		/* the tree of the running test */
static char		mark[PATH_MAX];	/* gpu_mark() creates it */

static int
guard_setup(void **state)
{
	struct unit	*u;

	if (unit_setup(state) == -1)
		return -1;
	u = *state;
	snprintf(mark, sizeof mark, "%s", unit_path(u, "gpu"));
	memset(&cur, 0, sizeof cur);
	return 0;
}

static int
guard_teardown(void **state)
{
	tree_end(&cur);
	return unit_teardown(state);
}

/* A root and its children, each waiting for signals. */
static void
tree_start(struct tree *t)
{
	pid_t	root;
	int	p[2], i;

	assert_int_equal(pipe(p), 0);
	root = fork();
	assert_true(root != -1);
	if (root == 0) {
		close(p[0]);
		t->pids[0] = getpid();
		for (i = 1; i < NPROC; i++) {
			if ((t->pids[i] = fork()) == -1)
				_exit(1);
			if (t->pids[i] == 0) {
				close(p[1]);
				for (;;)
					pause();
			}
		}
		if (write(p[1], t->pids, sizeof t->pids) !=
		    (ssize_t)sizeof t->pids)
			_exit(1);
		close(p[1]);
		for (;;)
			pause();
	}
	close(p[1]);
	t->pids[0] = root;
	assert_int_equal(read(p[0], t->pids, sizeof t->pids),
	    sizeof t->pids);
	close(p[0]);
}

/* Kills what is left of the tree and reaps all our children. */
static void
tree_end(struct tree *t)
{
	int	i;

	for (i = 0; i < NPROC; i++)
		if (t->pids[i] > 0)
			kill(t->pids[i], SIGKILL);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	memset(t, 0, sizeof *t);
}

/*
 * Waits up to ms for pid to be stopped (stopped set) or not.  Returns 1
 * once it is, else 0.
 */
static int
wait_state(pid_t pid, int stopped, int ms)
{
	char	c;

	for (;;) {
		c = gck_pid_state(pid);
		if ((c == 'T' || c == 't') == (stopped != 0) && c != 0)
			return 1;
		if (ms <= 0)
			return 0;
		usleep(10000);
		ms -= 10;
	}
}

/* Reaps our child pid, waiting up to ms.  Returns 0, or -1. */
static int
reap(pid_t pid, int ms, int *statusp)
{
	pid_t	r;

	for (;;) {
		if ((r = waitpid(pid, statusp, WNOHANG)) == pid)
			return 0;
		/* A killed root's orphans may not be ours quite yet. */
		if ((r == -1 && errno != EINTR && errno != ECHILD) || ms <= 0)
			return -1;
		usleep(10000);
		ms -= 10;
	}
}

static off_t
file_size(const char *path)
{
	struct stat	st;

	return stat(path, &st) == -1 ? -1 : st.st_size;
}

/*
 * The guard's GPU step: leaves a mark that it was taken, which says
 * whether the spool of device memory beside the work directory was
 * still there for it.
 */
static void
gpu_mark(struct gck_ctx *ctx, const struct gck_proc *cand, size_t n,
    const char *work)
{
	char	spool[PATH_MAX], *s;
	int	fd;

	snprintf(spool, sizeof spool, "%s.gpu/0-0.mem", work);
	if ((fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) != -1) {
		if (access(spool, F_OK) == 0)
			(void)write(fd, "spool", 5);
		/* and whether the criu it was told of had ended */
		snprintf(spool, sizeof spool, "%s", work);
		if ((s = strrchr(spool, '/')) != NULL)
			snprintf(s, sizeof spool - (size_t)(s - spool),
			    "/criu.done");
		if (s != NULL && access(spool, F_OK) == 0)
			(void)write(fd, "criu", 4);
		close(fd);
	}
}

/*
 * The guarding process, as gpuckpt: scans the tree, starts the guard,
 * stops the tree, says intent (if any), sends the guard's PID on fd
 * and ends as death says.  Its exit status says how far it came.
 */
static void
guarding(const struct unit *u, const struct tree *t, char intent,
    enum death death, int fd)
{
	struct gck_ptree	*pt = NULL;
	struct gck_guard	*g = NULL;
	struct gck_ctx		*ctx;
	pid_t			 pid;
	int			 i;

	if ((ctx = gck_ctx_new()) == NULL ||
	    gck_ptree_scan(ctx, t->pids[0], &pt) != GCK_OK ||
	    pt->n != NPROC)
		_exit(10);
	if (gck_guard_start(ctx, pt, unit_path(u, "work"),
	    unit_path(u, "out.partial"), gpu_mark, pt->procs, pt->n,
	    &g) != GCK_OK)
		_exit(11);
	for (i = 0; i < NPROC; i++)
		kill(t->pids[i], SIGSTOP);
	for (i = 0; i < NPROC; i++)
		if (!wait_state(t->pids[i], 1, WAIT_MS))
			_exit(12);
	if (intent != 0)
		gck_guard_intent(g, intent);
	if (death == DIE_CRIU) {
		/* A criu that outlives us, then ends, the guard told of it. */
		if ((pid = fork()) == -1)
			_exit(15);
		if (pid == 0) {
			close(gck_guard_fd(g));
			usleep(600000);
			if ((i = open(unit_path(u, "criu.done"), O_WRONLY |
			    O_CREAT | O_CLOEXEC, 0644)) != -1)
				close(i);
			_exit(0);
		}
		gck_guard_criu(g, pid);
	}
	if (death == DIE_RENAMED && rename(unit_path(u, "out.partial"),
	    unit_path(u, "out")) == -1)
		_exit(13);
	pid = gck_guard_pid(g);
	if (write(fd, &pid, sizeof pid) != (ssize_t)sizeof pid)
		_exit(14);
	if (death == SETTLED)
		gck_guard_free(g);
	_exit(0);
}

/*
 * Makes the work directory (with a file in it) and the partial output
 * file, runs the guarding process, and waits for it and for its guard
 * to be done.
 */
static void
run_guard(const struct unit *u, const struct tree *t, char intent,
    enum death death)
{
	pid_t	pid, guard = -1;
	int	p[2], status, fd;

	assert_int_equal(mkdir(unit_path(u, "work"), 0755), 0);
	assert_true((fd = open(unit_path(u, "work/stats-dump"),
	    O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) != -1);
	close(fd);
	/* the spool of device memory custom storage leaves beside it */
	assert_int_equal(mkdir(unit_path(u, "work.gpu"), 0700), 0);
	assert_true((fd = open(unit_path(u, "work.gpu/0-0.mem"),
	    O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) != -1);
	close(fd);
	assert_true((fd = open(unit_path(u, "out.partial"),
	    O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) != -1);
	close(fd);

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		close(p[0]);
		guarding(u, t, intent, death, p[1]);
	}
	close(p[1]);
	if (read(p[0], &guard, sizeof guard) != (ssize_t)sizeof guard)
		guard = -1;
	close(p[0]);
	assert_int_equal(reap(pid, WAIT_MS, &status), 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(guard > 0);
	/* Orphaned, the guard is ours now; gck_guard_free() reaped it. */
	if (death != SETTLED) {
		assert_int_equal(reap(guard, WAIT_MS, &status), 0);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
}

static void
assert_running(pid_t pid)
{
	if (!wait_state(pid, 0, WAIT_MS))
		fail_msg("pid %d: state %c, not running", (int)pid,
		    gck_pid_state(pid));
}

static void
assert_stopped(pid_t pid)
{
	char	c = gck_pid_state(pid);

	if (c != 'T' && c != 't')
		fail_msg("pid %d: state %c, not stopped", (int)pid,
		    c != 0 ? c : '-');
}

/* Killed by SIGKILL: orphans of a killed root are ours to reap. */
static void
assert_killed(pid_t pid)
{
	int	status;

	assert_int_equal(reap(pid, WAIT_MS, &status), 0);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
}

static void
assert_gone(const char *path)
{
	if (access(path, F_OK) == 0 || errno != ENOENT)
		fail_msg("'%s' is still there", path);
}

static void
assert_exists(const char *path)
{
	if (access(path, F_OK) == -1)
		fail_msg("'%s' is gone", path);
}

/* No intent: the tree is rolled back, resumed, its GPUs brought back. */
static void
test_resume(void **state)
{
	struct unit	*u = *state;
	int		 i;

	tree_start(&cur);
	run_guard(u, &cur, 0, DIE);
	for (i = 0; i < NPROC; i++)
		assert_running(cur.pids[i]);
	assert_exists(mark);
	assert_int_equal(file_size(mark), 5);	/* the spool was there */
	assert_gone(unit_path(u, "work"));
	assert_gone(unit_path(u, "work.gpu"));
	assert_gone(unit_path(u, "out.partial"));
}

/*
 * Dead while the criu it started runs on: the guard waits for that criu
 * to end before it brings the tree back.
 */
static void
test_waits_for_criu(void **state)
{
	struct unit	*u = *state;
	int		 i;

	tree_start(&cur);
	run_guard(u, &cur, 0, DIE_CRIU);
	for (i = 0; i < NPROC; i++)
		assert_running(cur.pids[i]);
	assert_exists(mark);
	assert_int_equal(file_size(mark), 9);	/* spool, and criu ended */
	assert_gone(unit_path(u, "work"));
	assert_gone(unit_path(u, "work.gpu"));
	/* (the criu, orphaned, is ours) */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void
test_kill(void **state)
{
	struct unit	*u = *state;
	int		 i;

	tree_start(&cur);
	run_guard(u, &cur, 'K', DIE);
	for (i = 0; i < NPROC; i++)
		assert_killed(cur.pids[i]);
	memset(&cur, 0, sizeof cur);
	assert_gone(mark);
	assert_gone(unit_path(u, "work"));
	assert_gone(unit_path(u, "work.gpu"));
	assert_gone(unit_path(u, "out.partial"));
}

static void
test_stay_stopped(void **state)
{
	struct unit	*u = *state;
	int		 i;

	tree_start(&cur);
	run_guard(u, &cur, 'S', DIE);
	for (i = 0; i < NPROC; i++)
		assert_stopped(cur.pids[i]);
	assert_gone(mark);
	assert_gone(unit_path(u, "work"));
	assert_gone(unit_path(u, "work.gpu"));
	assert_gone(unit_path(u, "out.partial"));
}

/* A process stopped before the checkpoint came stays stopped. */
static void
test_prestopped(void **state)
{
	struct unit	*u = *state;

	tree_start(&cur);
	assert_int_equal(kill(cur.pids[2], SIGSTOP), 0);
	assert_true(wait_state(cur.pids[2], 1, WAIT_MS));
	run_guard(u, &cur, 'R', DIE);
	assert_running(cur.pids[0]);
	assert_running(cur.pids[1]);
	assert_stopped(cur.pids[2]);
	assert_gone(unit_path(u, "work"));
	assert_gone(unit_path(u, "work.gpu"));
	assert_gone(unit_path(u, "out.partial"));
}

/* 'k' before the output has its name: rolled back, not killed. */
static void
test_late_intent_rolls_back(void **state)
{
	struct unit	*u = *state;
	int		 i;

	tree_start(&cur);
	run_guard(u, &cur, 'k', DIE);
	for (i = 0; i < NPROC; i++)
		assert_running(cur.pids[i]);
	assert_gone(unit_path(u, "work"));
	assert_gone(unit_path(u, "work.gpu"));
	assert_gone(unit_path(u, "out.partial"));
}

/* 'k' once the output has its name: killed, the output kept. */
static void
test_late_intent_renamed(void **state)
{
	struct unit	*u = *state;
	int		 i;

	tree_start(&cur);
	run_guard(u, &cur, 'k', DIE_RENAMED);
	for (i = 0; i < NPROC; i++)
		assert_killed(cur.pids[i]);
	memset(&cur, 0, sizeof cur);
	assert_gone(unit_path(u, "work"));
	assert_gone(unit_path(u, "work.gpu"));
	assert_exists(unit_path(u, "out"));
}

/* After gck_guard_free() the guard leaves everything as it is. */
static void
test_settled(void **state)
{
	struct unit	*u = *state;
	int		 i;

	tree_start(&cur);
	run_guard(u, &cur, 'K', SETTLED);
	for (i = 0; i < NPROC; i++)
		assert_stopped(cur.pids[i]);
	assert_gone(mark);
	assert_exists(unit_path(u, "work/stats-dump"));
	assert_exists(unit_path(u, "out.partial"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_waits_for_criu,
		    guard_setup, guard_teardown),
		cmocka_unit_test_setup_teardown(test_resume, guard_setup,
		    guard_teardown),
		cmocka_unit_test_setup_teardown(test_kill, guard_setup,
		    guard_teardown),
		cmocka_unit_test_setup_teardown(test_stay_stopped,
		    guard_setup, guard_teardown),
		cmocka_unit_test_setup_teardown(test_prestopped, guard_setup,
		    guard_teardown),
		cmocka_unit_test_setup_teardown(test_late_intent_rolls_back,
		    guard_setup, guard_teardown),
		cmocka_unit_test_setup_teardown(test_late_intent_renamed,
		    guard_setup, guard_teardown),
		cmocka_unit_test_setup_teardown(test_settled, guard_setup,
		    guard_teardown),
	};

	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == -1) {
		perror("t_guard: PR_SET_CHILD_SUBREAPER");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
