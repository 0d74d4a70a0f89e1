/** Thrown for what the model cannot fix by reading a result: the command never ran, the call was aborted. */
export class ToolFailure extends Error {
  override readonly name = 'ToolFailure'
}
