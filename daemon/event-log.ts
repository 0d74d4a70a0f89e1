import { eventTypeForState, type Task, type TaskEvent, type TaskEventType } from '../protocol/index.js'

type Listener = (event: TaskEvent) => void

/**
 * Lifecycle events with a sequence number. The last `capacity` events are kept, so a subscriber
 * that reconnects with the last sequence number it saw is replayed everything after it.
 */
export class EventLog {
  private readonly events: TaskEvent[] = []
  private readonly listeners = new Set<Listener>()
  private nextSeq = 1

  constructor(
    readonly daemonId: string,
    private readonly capacity = 10_000,
  ) {}

  publishState(task: Task): TaskEvent {
    return this.publish(eventTypeForState(task.state), task)
  }

  publish(type: TaskEventType, task: Task): TaskEvent {
    const event: TaskEvent = { seq: this.nextSeq++, daemonId: this.daemonId, type, at: new Date().toISOString(), taskId: task.id, owner: task.owner, task }
    this.events.push(event)
    if (this.events.length > this.capacity) this.events.splice(0, this.events.length - this.capacity)
    for (const listener of this.listeners) listener(event)
    return event
  }

  /** Kept events with a sequence number above `seq`. */
  since(seq: number): TaskEvent[] {
    const first = this.events.findIndex((event) => event.seq > seq)
    return first === -1 ? [] : this.events.slice(first)
  }

  get lastSeq(): number {
    return this.nextSeq - 1
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }
}
