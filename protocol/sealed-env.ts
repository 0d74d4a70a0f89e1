import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { TendError } from './errors.js'
import { readSecretFile } from './secret-file.js'

/** What a job carries instead of its environment values: AES-256-GCM under the cluster key. */
export interface Sealed {
  /** Format version. */
  v: 1
  /** 12 random bytes, base64: a fresh one for every seal. */
  iv: string
  /** GCM's authentication tag, base64. */
  tag: string
  /** The ciphertext, base64. */
  data: string
}

/** A job's environment: the names in the clear (a record lists them as envKeys), the values sealed. */
export interface SealedEnv extends Sealed {
  keys: string[]
}

/** How to make the key, said wherever one is missing. */
export const CLUSTER_KEY_HOWTO =
  'make one with `head -c 32 /dev/urandom > key; chmod 600 key`, copy it to every machine of the cluster, ' +
  'and name it in TEND_CLUSTER_KEY_FILE (or the clusterKeyFile setting of a worker)'

const KEY_BYTES = 32

/** The cluster key from its file (checked as every credential file is): 32 raw bytes, or 64 hex digits. */
export function readClusterKey(path: string): Buffer {
  const content = readSecretFile(path, 'cluster key file')
  if (content.length === KEY_BYTES) return content
  const text = content.toString('latin1').trim()
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex')
  throw new TendError('TEND_ERR_SECRET_FILE', {
    what: 'cluster key file',
    path,
    detail: `it holds ${content.length} bytes; a key is 32 random bytes (or 64 hex digits): ${CLUSTER_KEY_HOWTO}`,
  })
}

/** Seals bytes under the key, bound to `context` (the task id): sealed for one task, it opens for no other. */
export function seal(plain: Buffer, key: Buffer, context: string): Sealed {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', key, iv)
  cipher.setAAD(Buffer.from(context))
  const data = Buffer.concat([cipher.update(plain), cipher.final()])
  return { v: 1, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') }
}

/** Opens what seal() made with the same key and context; TEND_ERR_CLUSTER_KEY when it does not open. */
export function unseal(sealed: Sealed, key: Buffer, context: string): Buffer {
  try {
    if (sealed?.v !== 1) throw new Error(`unknown format ${JSON.stringify(sealed?.v)}`)
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.iv, 'base64'))
    decipher.setAAD(Buffer.from(context))
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'))
    return Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()])
  } catch (error) {
    throw new TendError(
      'TEND_ERR_CLUSTER_KEY',
      { detail: `sealed values of ${context} do not open with this machine's key (another key sealed them, or they were changed)` },
      { cause: error },
    )
  }
}

export function sealEnv(env: Record<string, string>, key: Buffer, taskId: string): SealedEnv {
  return { ...seal(Buffer.from(JSON.stringify(env)), key, `env:${taskId}`), keys: Object.keys(env) }
}

export function unsealEnv(sealed: SealedEnv, key: Buffer, taskId: string): Record<string, string> {
  const env = JSON.parse(unseal(sealed, key, `env:${taskId}`).toString('utf8')) as unknown
  if (typeof env !== 'object' || env === null || Array.isArray(env) || !Object.values(env).every((value) => typeof value === 'string')) {
    throw new TendError('TEND_ERR_CLUSTER_KEY', { detail: `the sealed environment of ${taskId} is not a map of names to values` })
  }
  return env as Record<string, string>
}
