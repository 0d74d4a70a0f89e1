/*
 * tend-spawner: what /proc says about a process. /proc/<pid>/stat is parsed here only; a keeper
 * names its children through /proc/self/task/<tid>/children, without a scan of all of /proc.
 *
 * Whether a process is dying (proc_dying), from what the kernel alone writes there: a signal that
 * is fatal to a process (SIGKILL, or any it neither catches, blocks nor ignores) is turned by the
 * kernel, as it is sent, into SIGKILL pending in every thread (complete_signal); a thread that
 * takes it, or that exits, carries PF_EXITING from the start of do_exit until it is gone; and a
 * thread that has gone is a zombie ('Z') or dead ('X'). A process is dying when every thread of it
 * is one of those: one whose main thread alone has left (pthread_exit) is not.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "spawner.h"

/* Reads the start of a small /proc file into text (NUL-terminated); 0 or an errno. */
static int read_proc_file(const char *path, char *text, size_t size) {
  int fd;
  do fd = open(path, O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno;
  ssize_t n;
  do n = read(fd, text, size - 1);
  while (n < 0 && errno == EINTR);
  int error = n < 0 ? errno : EIO;
  close(fd);
  if (n <= 0) return error;
  text[n] = 0;
  return 0;
}

/* Field `field` (3 or later, numeric) of /proc/<pid>/stat, pid given as text: 0, or an errno. */
static int stat_field(const char *pid, unsigned field, unsigned long long *value) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%s/stat", pid);
  int error = read_proc_file(path, text, sizeof text);
  if (error) return error;
  /* The command name (field 2) may hold spaces and parentheses: count from the last ')'. Field 3
   * starts after the first space that follows it, field n after the (n-2)th. */
  const char *at = strrchr(text, ')');
  if (!at) return EIO;
  for (unsigned spaces = 0; *at && spaces < field - 2; at++)
    if (*at == ' ') spaces++;
  if (*at < '0' || *at > '9') return EIO;
  unsigned long long parsed = 0;
  for (; *at >= '0' && *at <= '9'; at++) parsed = parsed * 10 + (unsigned long long)(*at - '0');
  *value = parsed;
  return 0;
}

int proc_start_time(pid_t pid, unsigned long long *start) {
  char text[24];
  snprintf(text, sizeof text, "%d", (int)pid);
  return stat_field(text, 22, start);
}

/* Calls visit for each pid in a children file (space-separated decimals); 0, or an errno. */
static int visit_listed(const char *path, void (*visit)(pid_t pid, void *context), void *context) {
  int fd;
  do fd = open(path, O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno;
  char data[512];
  unsigned long long pid = 0;
  int digits = 0;
  for (;;) {
    ssize_t n;
    do n = read(fd, data, sizeof data);
    while (n < 0 && errno == EINTR);
    if (n <= 0) break;
    /* A pid may be split between two reads: the digits carry over. */
    for (ssize_t i = 0; i < n; i++) {
      if (data[i] >= '0' && data[i] <= '9') {
        pid = pid * 10 + (unsigned long long)(data[i] - '0');
        digits++;
        continue;
      }
      if (digits && pid > 0 && pid <= 0x7fffffffULL) visit((pid_t)pid, context);
      pid = 0;
      digits = 0;
    }
  }
  if (digits && pid > 0 && pid <= 0x7fffffffULL) visit((pid_t)pid, context);
  close(fd);
  return 0;
}

/* The slow way, for a kernel without the children files (CONFIG_PROC_CHILDREN): every process's
 * parent, read from its stat. */
static void visit_children_by_scan(void (*visit)(pid_t pid, void *context), void *context) {
  unsigned long long self = (unsigned long long)getpid();
  DIR *proc = opendir("/proc");
  if (!proc) return;
  struct dirent *entry;
  while ((entry = readdir(proc)) != NULL) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    unsigned long long parent = 0;
    if (stat_field(entry->d_name, 4, &parent) == 0 && parent == self) visit((pid_t)atol(entry->d_name), context);
  }
  closedir(proc);
}

void proc_each_child(void (*visit)(pid_t pid, void *context), void *context) {
  DIR *tasks = opendir("/proc/self/task");
  if (!tasks) {
    visit_children_by_scan(visit, context);
    return;
  }
  struct dirent *entry;
  int listed = 0;
  while ((entry = readdir(tasks)) != NULL) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/self/task/%s/children", entry->d_name);
    if (visit_listed(path, visit, context) == 0) listed = 1;
  }
  closedir(tasks);
  if (!listed) visit_children_by_scan(visit, context);
}

static void send_signal(pid_t pid, void *context) {
  kill(pid, *(const int *)context);
}

void proc_signal_children(int signal_number) {
  proc_each_child(send_signal, &signal_number);
}

/* PF_EXITING (include/linux/sched.h), in field 9 of /proc/<pid>/task/<tid>/stat. */
#define PF_EXITING_FLAG 0x4ull
/* SIGKILL's bit in /proc/<pid>/task/<tid>/status's SigPnd and ShdPnd (bit n-1 for signal n). */
#define SIGKILL_BIT (1ull << (SIGKILL - 1))

/* Whether a thread's stat says it is exiting or gone (state Z or X, or PF_EXITING). */
static int thread_exiting(const char *thread) {
  char path[96], text[1024];
  snprintf(path, sizeof path, "%s/stat", thread);
  if (read_proc_file(path, text, sizeof text) != 0) return 1; /* gone meanwhile */
  const char *at = strrchr(text, ')');
  if (!at || at[1] != ' ' || !at[2]) return 0;
  char state = at[2];
  if (state == 'Z' || state == 'X') return 1;
  /* Field 9 (flags) follows fields 3 to 8: six spaces after the ')'. */
  for (unsigned spaces = 0; *at && spaces < 7; at++)
    if (*at == ' ') spaces++;
  unsigned long long flags = 0;
  if (*at < '0' || *at > '9') return 0;
  for (; *at >= '0' && *at <= '9'; at++) flags = flags * 10 + (unsigned long long)(*at - '0');
  return (flags & PF_EXITING_FLAG) != 0;
}

/* The hexadecimal mask after `name` (e.g. "\nSigPnd:\t") in a status text; 0 when not there. */
static unsigned long long status_mask(const char *text, const char *name) {
  const char *at = strstr(text, name);
  if (!at) return 0;
  return strtoull(at + strlen(name), NULL, 16);
}

/* Whether a thread has SIGKILL pending, its own or its process's. */
static int thread_killed(const char *thread) {
  char path[96], text[4096];
  snprintf(path, sizeof path, "%s/status", thread);
  if (read_proc_file(path, text, sizeof text) != 0) return 1; /* gone meanwhile */
  return ((status_mask(text, "\nSigPnd:\t") | status_mask(text, "\nShdPnd:\t")) & SIGKILL_BIT) != 0;
}

int proc_dying(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *threads = opendir(path);
  if (!threads) return 0;
  int dying = 1, seen = 0;
  struct dirent *entry;
  while (dying && (entry = readdir(threads)) != NULL) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    char thread[96];
    snprintf(thread, sizeof thread, "%s/%.20s", path, entry->d_name);
    seen = 1;
    /* Stat again after the status: a thread that took its SIGKILL between the first two reads
     * carries PF_EXITING by the third. */
    dying = thread_exiting(thread) || thread_killed(thread) || thread_exiting(thread);
  }
  closedir(threads);
  return dying && seen;
}
