/*
 * Unit tests for a tree's PID namespace (core/proc.c, gck_nsview_*): a
 * namespace of its own, its init and a child of the init that leads a
 * session there, seen from here and from there; and whether a process
 * has exited (gck_pid_gone).
 */

#include "config.h"

#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <limits.h>
#include <sched.h>
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
#include "core/proc.h"
#include "core/util.h"
#include "unit.h"

struct nsfix {
	struct unit	 u;
	pid_t		 outer;		/* the init's parent, outside */
	pid_t		 init;		/* pid 1 there */
	pid_t		 worker;	/* pid 2 there, a session leader */
};

static int	ns_setup(void **);
static int	ns_teardown(void **);
static void	ns_outer(int);
static int	wait_for(pid_t *, pid_t, int);
static int	levels(pid_t);

/*
 * Our child: makes the namespace, whose init (its child) starts the
 * worker and reaps; says the init's PID on fd, and waits for it.
 */
static void
ns_outer(int fd)
{
	pid_t	init, w;

	if (unshare(CLONE_NEWPID) == -1)
		_exit(1);
	if ((init = fork()) == 0) {
		if ((w = fork()) == 0) {
			setsid();
			for (;;)
				pause();
		}
		for (;;)
			if (wait(NULL) == -1 && errno == ECHILD)
				pause();
	}
	if (init == -1 || write(fd, &init, sizeof init) != sizeof init)
		_exit(1);
	close(fd);
	while (waitpid(init, NULL, 0) == -1 && errno == EINTR)
		;
	_exit(0);
}

/* Waits up to ms for the first child of parent, into *pidp. */
static int
wait_for(pid_t *pidp, pid_t parent, int ms)
{
	char	path[64], buf[256];

	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent,
	    (int)parent);
	for (; ms > 0; ms -= 10) {
		if (gck_read_small_file(path, buf, sizeof buf) > 0 &&
		    (*pidp = (pid_t)atoi(buf)) > 0)
			return 0;
		gck_msleep(10);
	}
	return -1;
}

/* How many namespaces pid is in, as our /proc shows them. */
static int
levels(pid_t pid)
{
	char	buf[256], *s, *e;
	int	n = 0;

	if (gck_pid_status(pid, "NSpid", buf, sizeof buf) == -1)
		return -1;
	for (s = buf; strtol(s, &e, 10), e != s; s = e)
		n++;
	return n;
}

static int
ns_setup(void **state)
{
	struct nsfix		*f;
	struct gck_ptree	*t;
	int			 p[2], ms, led;

	if ((f = calloc(1, sizeof *f)) == NULL || unit_init(&f->u) == -1 ||
	    pipe(p) == -1)
		return -1;
	if ((f->outer = fork()) == 0) {
		close(p[0]);
		ns_outer(p[1]);
	}
	close(p[1]);
	if (f->outer == -1 || read(p[0], &f->init, sizeof f->init) !=
	    sizeof f->init || wait_for(&f->worker, f->init, 5000) == -1)
		return -1;
	close(p[0]);
	/* The worker leads its session before the tests look at it. */
	for (ms = 5000; ms > 0; ms -= 10) {
		if (gck_ptree_scan(f->u.ctx, f->worker, &t) != GCK_OK)
			return -1;
		led = t->procs[0].sid == f->worker;
		gck_ptree_free(t);
		if (led)
			break;
		gck_msleep(10);
	}
	*state = f;
	return ms > 0 ? 0 : -1;
}

static int
ns_teardown(void **state)
{
	struct nsfix	*f = *state;

	kill(f->init, SIGKILL);
	while (waitpid(f->outer, NULL, 0) == -1 && errno == EINTR)
		;
	unit_release(&f->u);
	free(f);
	return 0;
}

/* Our own namespace: no namespace to speak of; PIDs are the same. */
static void
t_ours(void **state)
{
	struct nsfix		*f = *state;
	struct gck_nsview	*ns = (void *)1;

	assert_int_equal(gck_nsview_of(f->u.ctx, getpid(), &ns), GCK_OK);
	assert_null(ns);
	assert_int_equal(gck_nsview_local(NULL, f->worker), f->worker);
	assert_int_equal(gck_nsview_host(NULL, 42), 42);
}

/* Its init: pid 1 there, the init of its own namespace. */
static void
t_init(void **state)
{
	struct nsfix		*f = *state;
	struct gck_nsview	*ns = NULL;

	assert_int_equal(gck_nsview_of(f->u.ctx, f->init, &ns), GCK_OK);
	assert_non_null(ns);
	assert_int_equal(ns->root, f->init);
	assert_int_equal(ns->init, f->init);
	assert_int_equal((int)ns->level, levels(getpid()));
	assert_int_equal(gck_nsview_local(ns, f->init), 1);
	assert_int_equal(gck_nsview_local(ns, f->worker), 2);
	/* We and the init's parent are outside. */
	assert_int_equal(gck_nsview_local(ns, getpid()), 0);
	assert_int_equal(gck_nsview_local(ns, f->outer), 0);
	gck_nsview_free(ns);
}

/* A process under the init: its init is found by walking up. */
static void
t_worker(void **state)
{
	struct nsfix		*f = *state;
	struct gck_nsview	*ns = NULL;

	assert_int_equal(gck_nsview_of(f->u.ctx, f->worker, &ns), GCK_OK);
	assert_non_null(ns);
	assert_int_equal(ns->root, f->worker);
	assert_int_equal(ns->init, f->init);
	assert_int_equal(gck_nsview_local(ns, f->worker), 2);
	gck_nsview_free(ns);
}

/*
 * The tree under the init, learnt: the namespace's PIDs lead back here;
 * and seen from there: PIDs, parents, groups and sessions, 0 for a
 * leader outside (the init's session and group are ours).
 */
static void
t_tree(void **state)
{
	struct nsfix		*f = *state;
	struct gck_nsview	*ns = NULL;
	struct gck_ptree	*t = NULL;

	assert_int_equal(gck_nsview_of(f->u.ctx, f->init, &ns), GCK_OK);
	assert_int_equal(gck_ptree_scan(f->u.ctx, f->init, &t), GCK_OK);
	assert_int_equal(t->n, 2);
	assert_int_equal(gck_nsview_host(ns, 1), -1);	/* nothing learnt */
	assert_int_equal(gck_nsview_learn(f->u.ctx, ns, t), GCK_OK);
	assert_int_equal(gck_nsview_host(ns, 1), f->init);
	assert_int_equal(gck_nsview_host(ns, 2), f->worker);
	assert_int_equal(gck_nsview_host(ns, 3), -1);
	assert_int_equal(gck_nsview_sid(ns, &t->procs[0]), 0);
	assert_int_equal(gck_nsview_sid(ns, &t->procs[1]), 2);
	assert_int_equal(gck_nsview_sid(NULL, &t->procs[1]), f->worker);
	gck_nsview_tree(ns, t);
	assert_int_equal(t->procs[0].pid, 1);
	assert_int_equal(t->procs[0].ppid, 0);
	assert_int_equal(t->procs[0].sid, 0);
	assert_int_equal(t->procs[0].pgid, 0);
	assert_int_equal(t->procs[1].pid, 2);
	assert_int_equal(t->procs[1].ppid, 1);
	assert_int_equal(t->procs[1].sid, 2);
	assert_int_equal(t->procs[1].pgid, 2);
	gck_ptree_free(t);
	gck_nsview_free(ns);
}

/* A process that is gone. */
static void
t_gone(void **state)
{
	struct nsfix		*f = *state;
	struct gck_nsview	*ns = (void *)1;
	pid_t			 pid;

	if ((pid = fork()) == 0)
		_exit(0);
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(gck_nsview_of(f->u.ctx, pid, &ns), GCK_ENOPROC);
	assert_null(ns);
	assert_int_equal(gck_nsview_local(NULL, pid), pid);
}

/*
 * gck_pid_gone(): a live process, ours or the worker there, is not
 * gone; one that has exited is, a zombie not yet reaped as one reaped.
 */
static void
t_pid_gone(void **state)
{
	struct nsfix	*f = *state;
	pid_t		 pid;
	int		 ms;

	assert_int_equal(gck_pid_gone(getpid()), 0);
	assert_int_equal(gck_pid_gone(f->worker), 0);
	if ((pid = fork()) == 0)
		_exit(0);
	assert_true(pid > 0);
	for (ms = 5000; ms > 0 && gck_pid_state(pid) != 'Z'; ms -= 10)
		gck_msleep(10);
	assert_int_equal(gck_pid_state(pid), 'Z');
	assert_int_equal(gck_pid_gone(pid), 1);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(gck_pid_gone(pid), 1);
}

int
main(void)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_ours),
		cmocka_unit_test(t_init),
		cmocka_unit_test(t_worker),
		cmocka_unit_test(t_tree),
		cmocka_unit_test(t_gone),
		cmocka_unit_test(t_pid_gone),
	};

	return cmocka_run_group_tests(tests, ns_setup, ns_teardown);
}
