// The open task's CPU % and memory over the last minute or so (usage-history.js keeps them): two
// lines on one small chart, CPU on the left scale, memory on the right.

import uPlot from '/console/vendor/uPlot.esm.js'
import { formatBytes } from '../shared/format.js'
import { formatCpuPercent } from '../shared/aids-format.js'

const HEIGHT = 120
/** What the chart spans, in seconds (the history keeps a little more). */
const SPAN_S = 60

export function createUsageChart(element) {
  const style = getComputedStyle(element)
  const cpuStroke = style.getPropertyValue('--chart-line').trim() || '#2563eb'
  const cpuFill = style.getPropertyValue('--chart-fill').trim() || 'rgba(37,99,235,0.14)'
  const memStroke = style.getPropertyValue('--chart-memory').trim() || '#b45309'
  const axis = { stroke: style.getPropertyValue('color').trim() || '#666', size: 52, font: '11px system-ui, sans-serif', ticks: { size: 3 } }
  const plot = new uPlot(
    {
      width: Math.max(element.clientWidth, 240),
      height: HEIGHT,
      legend: { show: false },
      cursor: { show: false },
      select: { show: false },
      scales: {
        // The last minute, however few samples there are yet: the line grows from the right.
        x: { time: false, range: (_u, _min, max) => [max - SPAN_S, max] },
        // From zero, so that an idle task does not look busy; at least one core's worth of CPU.
        cpu: { range: (_u, _min, max) => [0, Math.max(max * 1.15, 100)] },
        mem: { range: (_u, _min, max) => [0, Math.max(max * 1.15, 1024 * 1024)] },
      },
      axes: [
        // Seconds before the latest sample, every 15 s.
        {
          ...axis,
          size: 22,
          splits: (u) => [60, 45, 30, 15, 0].map((ago) => u.scales.x.max - ago),
          values: (u, ticks) => ticks.map((tick) => `${Math.round(tick - u.scales.x.max)}s`),
        },
        { ...axis, scale: 'cpu', values: (_u, ticks) => ticks.map((tick) => `${tick}%`) },
        { ...axis, scale: 'mem', side: 1, size: 66, grid: { show: false }, values: (_u, ticks) => ticks.map((tick) => formatBytes(tick)) },
      ],
      series: [
        {},
        { label: 'CPU', scale: 'cpu', stroke: cpuStroke, fill: cpuFill, width: 1.5, points: { show: (u) => u.data[0].length < 2, size: 5 } },
        { label: 'Memory', scale: 'mem', stroke: memStroke, width: 1.5, points: { show: (u) => u.data[0].length < 2, size: 5 } },
      ],
    },
    [[], [], []],
    element,
  )
  element.setAttribute('role', 'img')
  new ResizeObserver(() => {
    if (element.clientWidth > 0 && element.clientWidth !== plot.width) plot.setSize({ width: element.clientWidth, height: HEIGHT })
  }).observe(element)

  return {
    /** Draws the samples (oldest first); none: an empty chart. */
    show(samples) {
      plot.setData([samples.map((sample) => sample.time / 1000), samples.map((sample) => sample.cpu), samples.map((sample) => sample.mem)])
      if (samples.length === 0) {
        element.setAttribute('aria-label', 'CPU and memory: no figures yet')
        element.title = ''
        return
      }
      const seconds = Math.round((samples[samples.length - 1].time - samples[0].time) / 1000)
      const cpu = Math.max(...samples.map((sample) => sample.cpu))
      const mem = Math.max(...samples.map((sample) => sample.mem))
      const label = `CPU and memory over the last ${seconds} s: CPU up to ${formatCpuPercent(cpu)}, memory up to ${formatBytes(mem)}`
      element.setAttribute('aria-label', label)
      element.title = label
    },
  }
}
