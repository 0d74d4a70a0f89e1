/*
 * tend-spawner: allocation that never fails (the helper and its keepers exit 3 when memory runs
 * out). In a file of its own: gcc 12's -fanalyzer, following realloc through it inside
 * tend-spawner.c, took one global buffer's move for another's free (a false double free).
 */
#include <stdlib.h>
#include <unistd.h>
#include "spawner.h"

void *xrealloc(void *pointer, size_t size) {
  void *grown = realloc(pointer, size);
  if (!grown) {
    static const char message[] = "tend-spawner: out of memory\n";
    ssize_t ignored = write(2, message, sizeof message - 1);
    (void)ignored;
    _exit(3);
  }
  return grown;
}
