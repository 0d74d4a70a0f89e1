export * from './define-tool.js'
export * from './schema-dsl.js'
export * from './types.js'
