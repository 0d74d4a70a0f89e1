// tend's own test helpers: a real daemon in a temp TEND_HOME whose stop() asserts that no process
// of it is left, and waitFor with a named timeout.
export { FIXTURES, startTestDaemon, type TestDaemon } from '../../../../test/helpers/test-daemon.js'
export { waitFor } from '../../../../test/helpers/wait-for.js'
export { isAlive } from '../../../../test/helpers/processes.js'
