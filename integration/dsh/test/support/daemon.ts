// tend's own test helpers: a real daemon in a temp TEND_HOME whose stop() asserts that no process
// of it is left, waitFor with a named timeout, and the cost line a notice and a result end with.
export { FIXTURES, startTestDaemon, type TestDaemon } from '../../../../test/helpers/test-daemon.js'
export { waitFor } from '../../../../test/helpers/wait-for.js'
export { isAlive } from '../../../../test/helpers/processes.js'
export { textWithCost } from '../../../../test/helpers/cost-line.js'
