/*
 * tend-spawner: what /proc says about a process. /proc/<pid>/stat is parsed here only; a keeper
 * names its children through /proc/self/task/<tid>/children, without a scan of all of /proc.
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

/* Sends signal to each pid in a children file (space-separated decimals); 0, or an errno. */
static int signal_listed(const char *path, int signal_number) {
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
      if (digits && pid > 0 && pid <= 0x7fffffffULL) kill((pid_t)pid, signal_number);
      pid = 0;
      digits = 0;
    }
  }
  if (digits && pid > 0 && pid <= 0x7fffffffULL) kill((pid_t)pid, signal_number);
  close(fd);
  return 0;
}

/* The slow way, for a kernel without the children files (CONFIG_PROC_CHILDREN): every process's
 * parent, read from its stat. */
static void signal_children_by_scan(int signal_number) {
  unsigned long long self = (unsigned long long)getpid();
  DIR *proc = opendir("/proc");
  if (!proc) return;
  struct dirent *entry;
  while ((entry = readdir(proc)) != NULL) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    unsigned long long parent = 0;
    if (stat_field(entry->d_name, 4, &parent) == 0 && parent == self) kill((pid_t)atol(entry->d_name), signal_number);
  }
  closedir(proc);
}

void proc_signal_children(int signal_number) {
  DIR *tasks = opendir("/proc/self/task");
  if (!tasks) {
    signal_children_by_scan(signal_number);
    return;
  }
  struct dirent *entry;
  int listed = 0;
  while ((entry = readdir(tasks)) != NULL) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/self/task/%s/children", entry->d_name);
    if (signal_listed(path, signal_number) == 0) listed = 1;
  }
  closedir(tasks);
  if (!listed) signal_children_by_scan(signal_number);
}
