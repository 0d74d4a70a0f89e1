export * from './layout.js'
export * from './output-read.js'
export * from './record-writer.js'
export * from './task-record.js'
