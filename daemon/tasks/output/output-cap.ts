import { formatBytes } from '../../../protocol/index.js'
import { heldFootprint, outputFootprint } from '../../../spool/index.js'

/**
 * What a task's output may take before it is stopped: its cap, in logical bytes (what readers see)
 * and on disk. A task can take disk past the end of its output.log without growing it
 * (fallocate with keep-size, which no file size limit bounds): the sandbox's filter refuses that,
 * `off` has none. The disk use gets room above the cap for what file systems allocate ahead of a
 * growing file (XFS's speculative preallocation), so that honest output is never stopped for it.
 */
export function allocationSlackBytes(capBytes: number): number {
  return Math.max(64 * 1024 * 1024, Math.ceil(capBytes / 8))
}

/** The most disk an output may take before it is stopped: its cap and the slack above it. */
export function outputDiskCeilingBytes(capBytes: number): number {
  return capBytes + allocationSlackBytes(capBytes)
}

/** Why the output is past its cap, or null. */
export function outputOverCap(footprint: { size: number; allocatedBytes: number }, capBytes: number): string | null {
  const cap = `output cap of ${formatBytes(capBytes)} reached`
  if (footprint.size > capBytes) return cap
  if (footprint.allocatedBytes > outputDiskCeilingBytes(capBytes))
    return `${cap} (${formatBytes(footprint.allocatedBytes)} taken on disk past the end of its output)`
  return null
}

/** Whether the disk held past the output's end is worth giving back when the task ends. */
export function holdsDiskPastEnd(footprint: { size: number; allocatedBytes: number }, capBytes: number): boolean {
  return footprint.allocatedBytes > footprint.size + allocationSlackBytes(capBytes)
}

/** An output's size and disk use: through the descriptor the daemon holds, else by its path; what the record says when neither answers. */
export function measureOutput(
  held: Parameters<typeof heldFootprint>[0] | undefined,
  file: string,
  recordedBytes: number,
): Promise<{ size: number; allocatedBytes: number }> {
  return (held ? heldFootprint(held) : outputFootprint(file)).catch(() => ({ size: recordedBytes, allocatedBytes: 0 }))
}
