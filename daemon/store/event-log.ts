import { eventTypeForState, TendError, type SpoolEvent, type Task, type TaskEvent, type TaskEventType } from '../../protocol/index.js'

type Listener = (event: TaskEvent) => void
type SpoolListener = (event: SpoolEvent) => void

/** Events kept for replay by default. */
export const DEFAULT_EVENT_WINDOW = 10_000

/**
 * Lifecycle events with a sequence number. The last `capacity` events are kept, so a subscriber
 * that reconnects with the last sequence number it saw is replayed everything after it; one that
 * asks from before the window (or from past the last event: another daemon's numbers) is told of
 * the gap instead of being silently skipped past it.
 */
export class EventLog {
  private readonly events: TaskEvent[] = []
  private readonly listeners = new Set<Listener>()
  private nextSeq = 1
  /** The highest sequence number no longer kept (0 while nothing was dropped). */
  private droppedSeq = 0
  private readonly spoolListeners = new Set<SpoolListener>()
  /** The last change of the spool's writability; null while it has always been writable. */
  private spoolChange: SpoolEvent | null = null

  constructor(
    readonly daemonId: string,
    private readonly capacity = DEFAULT_EVENT_WINDOW,
  ) {}

  publishState(task: Task): TaskEvent {
    return this.publish(eventTypeForState(task.state), task)
  }

  publish(type: TaskEventType, task: Task): TaskEvent {
    const event: TaskEvent = { seq: this.nextSeq++, daemonId: this.daemonId, type, at: new Date().toISOString(), taskId: task.id, owner: task.owner, task }
    this.events.push(event)
    if (this.events.length > this.capacity) {
      const dropped = this.events.splice(0, this.events.length - this.capacity)
      this.droppedSeq = dropped.at(-1)!.seq
    }
    for (const listener of this.listeners) listener(event)
    return event
  }

  /** Every event after `seq` is kept or still to come. */
  covers(seq: number): boolean {
    return seq >= this.droppedSeq && seq <= this.lastSeq
  }

  /** Throws TEND_ERR_EVENTS_GAP unless every event after `seq` is kept or still to come. */
  assertCovers(seq: number): void {
    if (this.covers(seq)) return
    const params = { oldest: this.droppedSeq + 1, since: seq, latest: this.lastSeq }
    if (seq < this.droppedSeq) throw new TendError('TEND_ERR_EVENTS_GAP', params)
    throw new TendError('TEND_ERR_EVENTS_GAP', params, {
      message:
        `events after seq ${seq} were never published by this daemon (${this.daemonId}, at seq ${this.lastSeq}` +
        `): the seq is another daemon's; list the tasks again, then follow from seq ${this.lastSeq}`,
    })
  }

  /** Kept events with a sequence number above `seq`; throws TEND_ERR_EVENTS_GAP when some are gone. */
  since(seq: number): TaskEvent[] {
    this.assertCovers(seq)
    return this.events.slice(seq - this.droppedSeq)
  }

  /** The event right after `seq`, when it has been published (and `seq` is covered). */
  after(seq: number): TaskEvent | undefined {
    return this.events[seq - this.droppedSeq]
  }

  get lastSeq(): number {
    return this.nextSeq - 1
  }

  /** Listeners (event-stream subscribers) attached now. */
  get subscriberCount(): number {
    return this.listeners.size
  }

  /**
   * The spool became unwritable, or writable again (or why not changed): told to the subscribers
   * that asked for spool events. Not a task event: no sequence number, not kept for replay.
   */
  publishSpool(writable: boolean, problem: string | null): void {
    const event: SpoolEvent = { type: 'spool', daemonId: this.daemonId, at: new Date().toISOString(), writable, problem }
    this.spoolChange = event
    for (const listener of this.spoolListeners) listener(event)
  }

  /** What a subscriber that comes now is told first: the spool's state while it is not writable. */
  get spoolUnwritable(): SpoolEvent | null {
    return this.spoolChange && !this.spoolChange.writable ? this.spoolChange : null
  }

  subscribeSpool(listener: SpoolListener): () => void {
    this.spoolListeners.add(listener)
    return () => this.spoolListeners.delete(listener)
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }
}
