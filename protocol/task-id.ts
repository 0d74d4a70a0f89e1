import { customAlphabet } from 'nanoid'
import { TASK_ID_ALPHABET, TASK_ID_LENGTH } from './ids.js'

/**
 * A new task id, from a cryptographic source: the daemon makes one for each task, a cluster's
 * submitter for each cluster task (the same id everywhere). Not in protocol/index.js: the CLI's
 * commands, which never make ids, do not load a random source.
 */
export const newTaskId = customAlphabet(TASK_ID_ALPHABET, TASK_ID_LENGTH)
