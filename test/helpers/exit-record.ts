import { expect } from 'vitest'

/** The figures of what a task used, as every keeper writes them into its exit file (daemon/spawner/PROTOCOL.md, "Exit file"). */
export const KEEPER_FIGURES = {
  cpuUserMs: expect.any(Number),
  cpuSystemMs: expect.any(Number),
  peakMemoryBytes: expect.any(Number),
  readBytes: expect.any(Number),
  writeBytes: expect.any(Number),
}
