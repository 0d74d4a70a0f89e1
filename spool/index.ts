export * from './layout.js'
export * from './output-read.js'
export * from './record-schema.js'
export * from './task-record.js'
