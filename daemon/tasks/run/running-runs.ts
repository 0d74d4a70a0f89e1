import type { TaskRun } from './task-run.js'

// What the supervisor does with all of its running tasks at once.

/** The runs whose process is tracked (task-run.ts: `running`). */
export function runningRuns(runs: Iterable<TaskRun>): TaskRun[] {
  return [...runs].filter((run) => run.running)
}

/** Stops these tasks for the daemon's stop (SIGTERM, then KILL after `graceMs`); resolves once each is recorded. */
export async function stopForDaemon(runs: readonly TaskRun[], reason: string, graceMs: number): Promise<void> {
  await Promise.all(
    runs.map((run) => {
      run.stop({ state: 'killed', stoppedBy: 'daemon-stop', reason, signal: 'SIGTERM', graceMs })
      return run.finished.promise.catch(() => undefined)
    }),
  )
}

/** Looks at each running task's leader and output cap, one after the other (the supervisor's output check). */
export async function checkRunning(runs: Iterable<TaskRun>): Promise<void> {
  // Live: a run that ends meanwhile is not looked at any more.
  for (const run of runs) {
    if (!run.running) continue
    run.checkLeader()
    await run.checkOutput()
  }
}
