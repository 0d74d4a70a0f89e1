/*
 * tend-spawner's parts (the wire protocol: PROTOCOL.md):
 *   tend-spawner.c  the helper: its loop, its replies, the keepers it forked or attached to
 *   request.c       parsing a framed request
 *   keeper.c        the keeper: one per task, the task's parent, writes its exit file
 *   child.c         the task child's setup, from signals to exec
 *   terminal.c      a terminal task's pseudo-terminal, and the keeper's relay between it and files
 *   lifeline.c      a keeper's watch on the helper, for a task that must end with its daemon
 *   idmap.c         idmapped mounts: the helper's user namespaces, the child's private mounts
 *   hidden.c        the child covering places hidden from the task, each opened without a link
 *   cgroup.c        the child joining its cgroups through folders checked by identity
 *   regular.c       opening a file a task could have made: no link, no wait, a regular file only
 *   memory.c        xrealloc: allocation that exits when memory runs out
 *   proc.c          what /proc says about a process: its start time, its children, whether it is dying
 *   usage.c         what a task used, from the keeper's account of the children it reaped
 *   leftovers.c     what a task leaves behind: the keeper stays for it, then kills it
 */
#ifndef TEND_SPAWNER_H
#define TEND_SPAWNER_H

#include <poll.h>
#include <stddef.h>
#include <sys/types.h>

/* The wire's version and limits (PROTOCOL.md); daemon/spawn/native-request.ts carries the same
 * numbers, and test/daemon/spawn/wire-limits.test.ts holds the two in step. */
#define PROTOCOL_VERSION 2
#define SPAWN_STDIN 1
#define SPAWN_TTY 2
#define SPAWN_LIFELINE 4
#define SPAWN_SETUP 8
#define SPAWN_FLAGS (SPAWN_STDIN | SPAWN_TTY | SPAWN_LIFELINE | SPAWN_SETUP)
/* What the program of a SPAWN_SETUP request writes on its fd 2 once set up (SETUP_DONE in spawner.ts). */
#define SETUP_DONE_LINE "tend: set up\n"
#define MAX_PAYLOAD (64u * 1024u * 1024u)
#define MAX_REQID 63
/* How long a keeper may wait for a SPAWN_SETUP program's line (setupWaitMs). */
#define MAX_SETUP_WAIT_MS 3600000
/* An exit file's path: room is left under PATH_MAX for the temporary file's suffix. */
#define MAX_EXIT_PATH 4000
/* Extra files, blobs and pinned folders together; views; covered files. */
#define MAX_DESCRIPTORS 1024
#define MAX_VIEWS 1024
#define MAX_COVERS 64

/* ------------------------------------------------------------- memory.c */

void *xrealloc(void *pointer, size_t size);

/* ------------------------------------------------------- tend-spawner.c */

/* Reads a non-blocking signalfd until it is empty (EINTR retried). */
void drain_signalfd(int fd);
__attribute__((format(printf, 1, 2))) void out_printf(const char *format, ...);
__attribute__((noreturn, format(printf, 1, 2))) void malformed(const char *format, ...);
/* In a keeper, once it has forked its task: gives back the pages of the helper's buffers (they
 * would otherwise become the keeper's own, one by one, as the helper keeps writing them). */
void release_helper_memory(void);

/* ------------------------------------------------------------ request.c */

/* A blob points into the request's payload: raw bytes, NULs allowed. */
struct blob {
  const char *bytes;
  size_t length;
};

/* A pinned folder (writable, handed to the task as a descriptor) or a view (read-only, not handed). */
/* A file the task sees with other contents: the path, and what it reads there (hidden.c). */
struct cover {
  const char *path;
  struct blob data;
};

struct pin {
  const char *path;
  unsigned long long dev, ino;
  /* Idmapped (always for a view): its owner's uid as pinned and the group the daemon chose for it
   * (the owner's primary group), which the mount shows as (and writes for) the request's uid and gid;
   * userns is the helper's user namespace of that mapping (idmap.c). */
  int mapped;
  unsigned long long owner_uid, owner_gid;
  int userns;
};

/* A cgroup folder as the daemon made it: the child joins only that very folder (cgroup.c). */
struct cgroup_join {
  const char *path;
  unsigned long long dev, ino, uid;
};

struct request {
  const char *reqid, *file, *cwd, *output;
  const char *exit_file; /* "" when the request names none */
  const char *stdin_fifo; /* "" for stdin from /dev/null; else the FIFO the keeper makes and holds */
  /* A terminal task (tty set): its stdin FIFO's bytes are typed into the terminal, and resize_fifo
   * carries "<cols> <rows>\n" lines; the terminal's size to start with. */
  int tty;
  const char *resize_fifo;
  unsigned cols, rows;
  int lifeline; /* SPAWN_LIFELINE: the keeper ends the task when the helper is gone */
  /* SPAWN_SETUP: the program's fd 2 is setup_fd (set by the keeper), on which it says
   * SETUP_DONE_LINE once set up; the keeper reports the start only then (keeper.c, wait_for_setup). */
  int reports_setup, setup_fd;
  unsigned long long setup_wait_ms; /* SPAWN_SETUP: past this, the program is killed (1 .. MAX_SETUP_WAIT_MS) */
  unsigned long long open_files, file_size;
  int check_cwd, set_user;
  unsigned long long cwd_dev, cwd_ino, uid, gid;
  size_t argc, envc, extrac, cgc, pinc, viewc, hiddenc, datac, coverc;
  char **argv, **envp, **extra;
  char **hidden; /* places the child covers, by descriptor, once its folders are mounted (hidden.c) */
  struct cgroup_join *cgroups;
  struct pin *pins, *views;
  struct blob *data;
  /* Files whose contents the child replaces for the task, each covered by descriptor (hidden.c). */
  struct cover *covers;
  /* The network namespace to join ("" for none): by path, only if it is that namespace (dev, ino). */
  const char *netns;
  unsigned long long netns_dev, netns_ino;
  int *fds; /* the child's descriptors for extra, data, pinned, before they move to fd 3... */
  int *view_fds; /* the child's descriptors of the views while it mounts them */
  /* The distinct user namespaces of the mapped pins and views (set by the helper: idmap_prepare). */
  int *userns_fds;
  size_t usernsc;
};

struct attach {
  const char *reqid;
  pid_t keeper, task;
  unsigned long long keeper_start;
};

enum request_kind { REQUEST_SPAWN, REQUEST_ATTACH };

/* Parses one payload (malformed() on any error). A spawn's tables go into one allocation that
 * *allocation owns (NULL for an attach). */
enum request_kind parse_request(char *payload, size_t length, struct request *spawn, struct attach *attach, void **allocation);

/* -------------------------------------------------------------- child.c */

/* Closes every descriptor from low up but keep (-1: none); highest_known bounds the fallback loop. */
void close_from(int low, int keep, int highest_known);
/* The same, keeping also the count descriptors of more (no allocation: a vfork child calls it). */
void close_except(int low, int keep, const int *more, size_t count, int highest_known);
/* Sets the task up and execs it; a failing step writes "<stage> <errno>[ <index>]" to error_fd. */
__attribute__((noreturn)) void run_child(struct request *r, int error_fd, int highest_known);

/* ----------------------------------------------------------- lifeline.c */

struct lifeline {
  int fd;       /* the keeper's end of its report channel, watched for POLLHUP; -1 once it broke */
  int children; /* a signalfd for SIGCHLD */
  pid_t task;
  int task_status, task_reaped;
  int ending; /* the lifeline broke: what is left of the task is being killed */
  int broke;  /* ... and it broke while the task ran: the exit file says so */
  /* The task's folder (-1: none). Its file "lease", once the daemon has written it, holds until when
   * (CLOCK_MONOTONIC, ms) the daemon may still run the task: past that, the keeper ends it as if the
   * lifeline broke, even though the helper (and the daemon) are still there: a daemon that is
   * frozen (stopped, or too slow to renew) must not run a task another machine may now run. */
  int lease_dir;
  int lease_ran_out; /* the lease ran out while the task ran: the exit file says so */
};

/* Before the fork: the keeper becomes a child subreaper and reads SIGCHLD through a signalfd;
 * lease_dir is the task's folder (or -1). -1 with errno set on failure. */
int lifeline_begin(struct lifeline *lifeline, int report_fd, int lease_dir);
/* How long a poll of the keeper's may wait before the lease is looked at again (-1: forever). */
int lifeline_timeout_ms(const struct lifeline *lifeline);
/* The two descriptors to poll (the lifeline, SIGCHLD), for a loop of the keeper's own. */
void lifeline_poll_fds(const struct lifeline *lifeline, struct pollfd fds[2]);
/* After that poll: reaps what ended (keeping the task's status); once the lifeline broke, kills the
 * task's process group and the keeper's children. */
void lifeline_on_ready(struct lifeline *lifeline, const struct pollfd fds[2]);
/* CLOCK_MONOTONIC in milliseconds (the lease's clock, and the keeper's deadlines). */
long long monotonic_ms(void);
/* A plain task's wait, watching the lifeline meanwhile; returns the task's wait status. */
int lifeline_wait(struct lifeline *lifeline);
/* After the lifeline broke and the task was reaped: kills and reaps until the keeper has no child. */
void lifeline_end_tree(struct lifeline *lifeline);

/* ----------------------------------------------------------- terminal.c */

/* A new pseudo-terminal of this size: its master (O_CLOEXEC, non-blocking), and in *terminal its
 * other side (O_NOCTTY, O_CLOEXEC), opened through the master (no path). -1 with errno set. */
int open_terminal(unsigned cols, unsigned rows, int *terminal);

struct relay {
  int master, output, input, resize;
};

/* Until the task (the keeper's child) has ended and its terminal is drained: copies the terminal's
 * output to the output file, types the input FIFO's bytes into it, applies resize requests, and
 * watches the lifeline (NULL: none), which then reaps the task. Returns the task's wait status. */
int relay_terminal(const struct relay *relay, pid_t task, struct lifeline *lifeline, int orphans);
/* Bytes of the task's output that the output file refused so far (the disk: not the output cap). */
unsigned long long output_lost_bytes(void);

/* A FIFO, made (0600) if missing and opened O_RDWR | O_NONBLOCK (which never waits on Linux); a
 * path that is not a FIFO is refused (ENXIO). -1 with errno set on failure. */
int hold_fifo(const char *path);

/* -------------------------------------------------------------- idmap.c */

/* In the helper, before the keeper is forked: the user namespace of every mapped pin and view (made
 * once per mapping and kept), into their userns and r->userns_fds. -1 with errno, and in *index the
 * entry (pins, then views) that failed. */
int idmap_prepare(struct request *r, size_t *index);
/* In the child: a mount namespace of its own whose mounts propagate nowhere. -1 with errno. */
int idmap_private_namespace(void);
/* In the child: a copy of the tree at source (with its submounts) idmapped through userns (and
 * read-only if asked) is mounted onto target; answers an O_PATH descriptor of its root. -1 with errno. */
int idmap_attach(int source, int target, int userns, int read_only);

/* ------------------------------------------------------------- hidden.c */

/* In the child, in its own mount namespace: covers the place at path (opened by openat2 without
 * following any link) with an empty read-only tmpfs when it is a folder, else with a read-only bind
 * of /dev/null. A place that is gone, holds a link on its way, or that root may not enter is left
 * as it is: 0 either way. -1 with errno. */
int hide_place(const char *path);
/* Covers the regular file at path, opened as hide_place opens a place, with a read-only file that
 * holds `data` (a tmpfs of its own, made detached): the task reads `data` there. Skipped (0) as
 * hide_place skips; a place that is not a regular file is EINVAL. -1 with errno set on failure. */
int cover_file(const char *path, const struct blob *data);

/* ------------------------------------------------------------- cgroup.c */

/* Moves the calling thread into the group: its folder opened without following any symbolic link,
 * checked to be the same folder (device, inode) with the same owner, then 0 written to its `tasks`
 * file. A folder that is another one now: ESTALE. -1 with errno. */
int join_cgroup(const struct cgroup_join *group);
/* ------------------------------------------------------------ regular.c */

/* openat(dir_fd, path, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode), then fstat: a
 * descriptor of a regular file, or -1 with errno set (ENXIO: there is something else at path). The
 * descriptor stays O_NONBLOCK, which changes nothing for a regular file. */
int open_regular(int dir_fd, const char *path, int flags, mode_t mode);

/* --------------------------------------------------------------- proc.c */

/* Field 22 of /proc/<pid>/stat (start time, clock ticks after boot): 0, or an errno. */
int proc_start_time(pid_t pid, unsigned long long *start);
/* Sends the signal to every child of the calling process (every thread's), as /proc names them. */
void proc_signal_children(int signal_number);
/* Calls visit for every child of the calling process (every thread's), as /proc names them. */
void proc_each_child(void (*visit)(pid_t pid, void *context), void *context);

/* Whether the process is on its way out, as the kernel says: every thread of it exiting, a zombie,
 * or with SIGKILL pending. 0 when /proc cannot say. */
int proc_dying(pid_t pid);

/* ------------------------------------------------------------- keeper.c */

/* The keeper's life: makes and holds the task's stdin FIFO (if any), forks and watches the task,
 * reports on report_fd, writes the exit file. */
__attribute__((noreturn)) void run_keeper(struct request *r, int report_fd, int highest_known);
/* What ended a task, besides itself: its keeper, because the helper was gone or its lease ran out. */
enum { ENDED_BY_ITSELF = 0, ENDED_BY_LIFELINE = 1, ENDED_BY_LEASE = 2 };
/* The 5th word of an `exited` line for what ended the task ("" when it ended by itself). */
const char *ended_by_word(int ended_by);
/* " lost=<n>" for a nonzero count of lost output bytes, else "" (one static buffer: use at once). */
const char *lost_word(unsigned long long lost);

/* ------------------------------------------------------------- usage.c */

/* Reaps every child of the keeper that has ended (its orphans, handed to it as a subreaper);
 * answers 1 while a child is left (running, or stopped), 0 once it has none. */
int reap_ended_children(void);
/* Waits (a bounded time) for the keeper's children that are a sandbox's init, and reaps them. */
void reap_sandbox_inits(void);
/* Waits (a bounded time) for the keeper's children that are dying (proc_dying), and reaps them. */
void reap_dying_children(void);
/* The exit file's figures (PROTOCOL.md, "Exit file"), each after a comma, from RUSAGE_CHILDREN;
 * answers what snprintf does. */
int usage_fields(char *text, size_t size);

/* ------------------------------------------------------------- leftovers.c */

/* Blocks SIGCHLD (the task child unblocks it, child.c) and answers a signalfd for it, or -1. */
int watch_children(void);
/* After the task's end: stays while a child of the keeper is left and a helper listens, then kills
 * what is left. */
void outlive_leftovers(int report_fd, int heard);

#endif
