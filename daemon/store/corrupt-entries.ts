import type { CorruptTask } from '../../protocol/index.js'

/**
 * Spool entries that could not be loaded as tasks (docs/spool.md), held apart from the task store
 * so that nothing that runs, waits or announces tasks ever meets one. Recovery fills it at start;
 * list, show, rm and gc consult it; rm, gc and the spool quota empty it.
 */
export class CorruptEntries {
  private readonly entries = new Map<string, CorruptTask>()

  add(entry: CorruptTask): void {
    this.entries.set(entry.id, entry)
  }

  find(id: string): CorruptTask | undefined {
    return this.entries.get(id)
  }

  /**
   * The entry as a requester may see it: an owner sees only entries whose record names it (the
   * operator, `owner` null, sees every one). Undefined otherwise, as for an id that is no entry.
   */
  visible(id: string, owner: string | null): CorruptTask | undefined {
    const entry = this.entries.get(id)
    return entry && (owner === null || entry.owner === owner) ? entry : undefined
  }

  /** Every entry (or one owner's), oldest first. */
  list(owner: string | null = null): CorruptTask[] {
    return [...this.entries.values()]
      .filter((entry) => owner === null || entry.owner === owner)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id))
  }

  forget(id: string): void {
    this.entries.delete(id)
  }

  get size(): number {
    return this.entries.size
  }
}
