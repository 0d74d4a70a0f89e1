import { mkdir, unlink } from 'node:fs/promises'
import { openRegularFileForWrite } from '../../spool/index.js'
import { ADDON_PATH, loadAddon } from '../native/load-addon.js'
import { getSystemErrorMap } from 'node:util'

/** One file to write whole: made, written to its last byte, fsynced and closed; removed again on any failure. */
export interface DurableFile {
  path: string
  /** Written as UTF-8. */
  text: string
  /** Make this folder (0700, with its parents) and an empty output file in it first; null leaves them alone. */
  folder: { dir: string; outputFile: string } | null
}

/** Resolves once the file is on disk; rejects with a Node-style error (`code` such as ENOSPC, `syscall`, `path`). */
export type WriteDurably = (file: DurableFile) => Promise<void>

/** The C addon (daemon/durable-write/durable-write.c): the whole write as one job of libuv's thread pool. */
interface DurableWriteAddon {
  writeFile(
    path: string,
    text: string,
    dir: string | null,
    outputFile: string | null,
    callback: (errno: number | null, syscall?: string, path?: string) => void,
  ): void
}

export interface DurableWriter {
  write: WriteDurably
  /** 'addon' when the C addon loaded, else 'fs' with the reason. */
  via: 'addon' | 'fs'
  reason?: string
}

/** Node's fs calls: the same files, each call its own trip through the thread pool and the event loop. */
export const FS_DURABLE_WRITER: DurableWriter = { write: writeWithFs, via: 'fs', reason: 'chosen' }

/** The addon when it was built, else Node's fs calls. */
export function loadDurableWriter(path: string = ADDON_PATH): DurableWriter {
  const { addon, reason } = loadAddon<DurableWriteAddon>('durableWrite', 'durable-write', ['writeFile'], path)
  return addon ? { write: (file) => writeWithAddon(addon, file), via: 'addon' } : { write: writeWithFs, via: 'fs', reason }
}

function writeWithAddon(addon: DurableWriteAddon, file: DurableFile): Promise<void> {
  return new Promise((resolve, reject) => {
    addon.writeFile(file.path, file.text, file.folder?.dir ?? null, file.folder?.outputFile ?? null, (errno, syscall, path) => {
      if (errno === null) resolve()
      else reject(systemError(errno, syscall ?? 'write', path ?? file.path))
    })
  })
}

/** The error Node's fs would have thrown for this errno. */
function systemError(errno: number, syscall: string, path: string): NodeJS.ErrnoException {
  const [code, description] = getSystemErrorMap().get(-errno) ?? [`E${errno}`, `error ${errno}`]
  return Object.assign(new Error(`${code}: ${description}, ${syscall} '${path}'`), { errno: -errno, code, syscall, path })
}

async function writeWithFs(file: DurableFile): Promise<void> {
  if (file.folder) {
    await mkdir(file.folder.dir, { recursive: true, mode: 0o700 })
    await (await openRegularFileForWrite(file.folder.outputFile, { append: true })).close()
  }
  const bytes = Buffer.from(file.text)
  // The same checks as the addon's: no link followed, no FIFO waited on, a new regular file only.
  const handle = await openRegularFileForWrite(file.path, { fresh: true })
  try {
    let offset = 0
    while (offset < bytes.length) {
      const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset)
      // write(2) answering 0 would loop for ever: a disk that takes nothing more is an I/O error.
      if (bytesWritten <= 0)
        throw Object.assign(new Error(`EIO: the write stopped at byte ${offset} of ${bytes.length}, write '${file.path}'`), { code: 'EIO' })
      offset += bytesWritten
    }
    await handle.sync()
  } catch (error) {
    await handle.close().catch(() => undefined)
    await unlink(file.path).catch(() => undefined)
    throw error
  }
  try {
    await handle.close()
  } catch (error) {
    await unlink(file.path).catch(() => undefined)
    throw error
  }
}
