import { Type, type Static } from 'typebox'
import { Value } from 'typebox/value'
import { DEFAULT_TOOL_SETTINGS, type ToolSettings } from '../core/index.js'

/** The plugin's options, as a harness configuration entry gives them. Every one is optional. */
export const DshPluginConfigSchema = Type.Object(
  {
    /** tend's state folder. Default: TEND_HOME, else the XDG state folder. */
    home: Type.Optional(Type.String({ minLength: 1 })),
    /** Stop an agent's running tasks when the agent is disposed (false keeps them). Default true. */
    stopTasksOnDispose: Type.Optional(Type.Boolean()),
    /**
     * Turns (or extra steps) tend's notices may start on their own between two user messages.
     * Past it, notices wait for the agent's next step, whatever starts it. Default 3.
     */
    maxWakeupsPerUserMessage: Type.Optional(Type.Integer({ minimum: 0 })),
    /** A cluster's Redis (redis://host:port): the tasks run on its workers. Default TEND_CLUSTER; unset: the local daemon. */
    cluster: Type.Optional(Type.String({ pattern: '^rediss?://' })),
    /** The cluster's queue. Default TEND_CLUSTER_QUEUE, else the default queue. */
    clusterQueue: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$' })),
    /** Folder to load the harness packages from when they are not installed beside tend. Default: beside tend, then the working directory. */
    harnessFrom: Type.Optional(Type.String({ minLength: 1 })),
    /** Bytes of output handed to the model per result. Default 30000. */
    outputBudgetBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Foreground bash time limit when the call gives none, in ms. Default 120000. */
    defaultTimeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Largest foreground bash time limit a call may ask for, in ms. Default 600000. */
    maxTimeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Longest task_output wait_ms, in ms. Default 300000. */
    maxWaitMs: Type.Optional(Type.Integer({ minimum: 0 })),
    /** How long a foreground bash runs before the call returns and leaves it running, when the call gives no yield_ms, in ms. Default 10000. */
    defaultYieldMs: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Largest yield_ms a call may ask for, in ms. Default 600000. */
    maxYieldMs: Type.Optional(Type.Integer({ minimum: 1 })),
    /** bash offers network "host" (the host's whole network) to the agents. Default false. */
    allowHostNetwork: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
)
export type DshPluginConfig = Static<typeof DshPluginConfigSchema>

export interface DshPluginOptions {
  home: string | undefined
  stopTasksOnDispose: boolean
  maxWakeupsPerUserMessage: number
  harnessFrom: string | undefined
  cluster: string | undefined
  clusterQueue: string | undefined
  settings: ToolSettings
}

export const DEFAULT_MAX_WAKEUPS_PER_USER_MESSAGE = 3

/** Fills the defaults once; lists every violation (unknown options included) in one error. */
export function normalizeDshPluginConfig(config: unknown = {}): Readonly<DshPluginOptions> {
  const given = config ?? {}
  const problems: string[] = []
  if (typeof given !== 'object' || Array.isArray(given)) problems.push(`expected an object, got ${JSON.stringify(given)}`)
  else {
    const known = Object.keys(DshPluginConfigSchema.properties)
    for (const key of Object.keys(given)) if (!known.includes(key)) problems.push(`${key}: unknown option (known: ${known.join(', ')})`)
    for (const error of Value.Errors(DshPluginConfigSchema, given)) {
      const key = error.instancePath.replace(/^\//, '')
      if (known.includes(key)) problems.push(`${key}: ${error.message}, got ${JSON.stringify((given as Record<string, unknown>)[key])}`)
    }
  }
  if (problems.length > 0) throw new TypeError(`invalid tend plugin configuration: ${problems.join('; ')}`)
  const valid = given as DshPluginConfig
  const {
    home,
    stopTasksOnDispose = true,
    maxWakeupsPerUserMessage = DEFAULT_MAX_WAKEUPS_PER_USER_MESSAGE,
    harnessFrom,
    cluster,
    clusterQueue,
    ...rest
  } = valid
  const overrides = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== undefined))
  return Object.freeze({
    home,
    stopTasksOnDispose,
    maxWakeupsPerUserMessage,
    harnessFrom,
    cluster,
    clusterQueue,
    settings: Object.freeze({ ...DEFAULT_TOOL_SETTINGS, ...overrides }),
  })
}
