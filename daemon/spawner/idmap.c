/*
 * tend-spawner: idmapped mounts (see "Identity" in PROTOCOL.md).
 *
 * A root daemon's sandboxed task runs on a uid of its own, yet must write its folders as their
 * owners would. The child, still root, mounts a copy of each such folder idmapped through a user
 * namespace that maps the owner to the task's id, and every other id to itself: the owner's files
 * show as the task's, what the task creates is written for the owner, and a file of any other id
 * keeps its id (unmapped, the kernel would refuse every change to it with EOVERFLOW, even a
 * removal the folder's rights allow). The task's own id on disk stays unmapped: no file shows as
 * the task's but the owner's. Such a user namespace takes a process of its own to make (~0.2 ms),
 * so the helper makes one per mapping, once, and keeps its descriptor; every keeper and child
 * inherits it by fork.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mount-api.h"
#include "spawner.h"

/* -------------------------------------------------- the helper's namespaces */

struct mapping {
  unsigned long long from_uid, from_gid, to_uid, to_gid;
  int fd;
};

/*
 * One mapping per (folder owner, task id) pair: a daemon sees few folder owners, but each owner of
 * tasks has a task id of its own. Bounded all the same, since owners are named by clients: past
 * this many the next one not in use is replaced (and made again, ~0.2 ms, when asked for again).
 * Each costs the helper a descriptor and the kernel a user namespace counted against root's
 * user.max_user_namespaces.
 */
#define MAX_MAPPINGS 256
static struct mapping mappings[MAX_MAPPINGS];
static size_t mapping_count, next_replaced;

static int write_map(pid_t pid, const char *file, const char *text) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
  int fd;
  do fd = open(path, O_WRONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  size_t length = strlen(text);
  ssize_t n;
  do n = write(fd, text, length);
  while (n < 0 && errno == EINTR);
  int error = n < 0 ? errno : (size_t)n != length ? EIO : 0;
  close(fd);
  errno = error;
  return error ? -1 : 0;
}

/* The highest valid id: (uid_t)-1 means "no id" to every system call. */
#define LAST_ID 4294967294ULL

/*
 * A map (uid_map or gid_map format) that shows `from` as `to` and every other id as itself, but
 * `to`, which nothing shows as but `from`: at most four extents (the kernel takes 340), whose
 * inside ranges do not overlap, nor their outside ones. One line when from and to are the same id.
 */
static void write_id_map(char *map, size_t size, unsigned long long from, unsigned long long to) {
  if (from == to) {
    snprintf(map, size, "0 0 %llu\n", LAST_ID + 1);
    return;
  }
  unsigned long long low = from < to ? from : to, high = from < to ? to : from;
  size_t used = 0;
  if (low > 0) used += (size_t)snprintf(map + used, size - used, "0 0 %llu\n", low);
  if (high - low > 1) used += (size_t)snprintf(map + used, size - used, "%llu %llu %llu\n", low + 1, low + 1, high - low - 1);
  if (high < LAST_ID) used += (size_t)snprintf(map + used, size - used, "%llu %llu %llu\n", high + 1, high + 1, LAST_ID - high);
  snprintf(map + used, size - used, "%llu %llu 1\n", from, to);
}

/*
 * A user namespace whose maps are write_id_map's for (from_uid, to_uid) and (from_gid, to_gid):
 * its first process is born in it (clone with CLONE_NEWUSER, so there is nothing to wait for), gets
 * its maps written and its namespace opened, then is killed and reaped at once.
 */
static int make_userns(unsigned long long from_uid, unsigned long long from_gid, unsigned long long to_uid, unsigned long long to_gid) {
  pid_t pid = (pid_t)syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), 0UL, 0UL, 0UL, 0UL);
  if (pid < 0) return -1;
  if (pid == 0) {
    /* Nothing but waiting to be killed; should the helper die first, it goes too. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;) pause();
  }
  /* Four lines of three ids of at most ten digits each. */
  char uid_map[160], gid_map[160];
  write_id_map(uid_map, sizeof uid_map, from_uid, to_uid);
  write_id_map(gid_map, sizeof gid_map, from_gid, to_gid);
  int fd = -1;
  int error = 0;
  if (write_map(pid, "uid_map", uid_map) != 0 || write_map(pid, "setgroups", "deny") != 0 || write_map(pid, "gid_map", gid_map) != 0) {
    error = errno;
  } else {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
    do fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) error = errno;
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
  }
  errno = error;
  return fd;
}

static int in_use(const struct request *r, int fd) {
  for (size_t i = 0; i < r->usernsc; i++)
    if (r->userns_fds[i] == fd) return 1;
  return 0;
}

static int userns_for(const struct request *r, unsigned long long from_uid, unsigned long long from_gid) {
  for (size_t i = 0; i < mapping_count; i++) {
    const struct mapping *m = &mappings[i];
    if (m->from_uid == from_uid && m->from_gid == from_gid && m->to_uid == r->uid && m->to_gid == r->gid) return m->fd;
  }
  /* A slot: a free one, else the oldest that this request does not use. */
  size_t slot = mapping_count;
  if (slot == MAX_MAPPINGS) {
    for (size_t tries = 0; tries < MAX_MAPPINGS && slot == MAX_MAPPINGS; tries++, next_replaced = (next_replaced + 1) % MAX_MAPPINGS)
      if (!in_use(r, mappings[next_replaced].fd)) slot = next_replaced;
    if (slot == MAX_MAPPINGS) {
      errno = E2BIG;
      return -1;
    }
    next_replaced = (slot + 1) % MAX_MAPPINGS;
  }
  int fd = make_userns(from_uid, from_gid, r->uid, r->gid);
  if (fd < 0) return -1;
  if (slot < mapping_count) close(mappings[slot].fd);
  else mapping_count++;
  mappings[slot] = (struct mapping){from_uid, from_gid, r->uid, r->gid, fd};
  return fd;
}

int idmap_prepare(struct request *r, size_t *index) {
  r->usernsc = 0;
  for (size_t k = 0; k < r->pinc + r->viewc; k++) {
    struct pin *entry = k < r->pinc ? &r->pins[k] : &r->views[k - r->pinc];
    entry->userns = -1;
    if (!entry->mapped) continue;
    int fd = userns_for(r, entry->owner_uid, entry->owner_gid);
    if (fd < 0) {
      *index = k;
      return -1;
    }
    entry->userns = fd;
    size_t seen = 0;
    while (seen < r->usernsc && r->userns_fds[seen] != fd) seen++;
    if (seen == r->usernsc) r->userns_fds[r->usernsc++] = fd;
  }
  return 0;
}

/* ------------------------------------------------------- the child's mounts */

int idmap_private_namespace(void) {
  if (unshare(CLONE_NEWNS) != 0) return -1;
  /* Nothing mounted here reaches the host's namespace, nor anything of the host's here. */
  return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

int idmap_attach(int source, int target, int userns, int read_only) {
  int tree = (int)syscall(SYS_open_tree, source, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  if (tree < 0) return -1;
  struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | (read_only ? MOUNT_ATTR_RDONLY : 0), .userns_fd = (unsigned long long)userns};
  int attached = -1;
  int error = 0;
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0) error = errno;
  else if (syscall(SYS_move_mount, tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) error = errno;
  else {
    /* bubblewrap binds what /proc/self/fd/N names; the tree's own descriptor does not resolve
     * there, a plain one of the mounted root does. */
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    do attached = (int)syscall(SYS_openat2, tree, ".", &how, sizeof how);
    while (attached < 0 && errno == EINTR);
    if (attached < 0) error = errno;
  }
  close(tree);
  errno = error;
  return attached;
}
