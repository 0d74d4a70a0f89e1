// A small line of spool use over the last ~10 minutes. Too small for axes: the text next to it
// gives the value, the line its trend, the title the range it covers.

import uPlot from '/console/vendor/uPlot.esm.js'
import { formatBytes } from '../shared/format.js'

const MAX_POINTS = 120

export function createSpoolChart(element) {
  const times = []
  const used = []
  const style = getComputedStyle(element)
  const stroke = style.getPropertyValue('--chart-line').trim() || '#3b82f6'
  const fill = style.getPropertyValue('--chart-fill').trim() || 'rgba(59,130,246,0.15)'
  const plot = new uPlot(
    {
      width: 240,
      height: 60,
      legend: { show: false },
      cursor: { show: false },
      select: { show: false },
      axes: [{ show: false }, { show: false }],
      // From zero, so that a small change does not look like a spike.
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(max * 1.15, 1024)] } },
      series: [{}, { stroke, fill, width: 1.5, points: { show: false } }],
    },
    [times, used],
    element,
  )
  element.setAttribute('role', 'img')

  return {
    add(bytes) {
      times.push(Date.now() / 1000)
      used.push(bytes)
      if (times.length > MAX_POINTS) {
        times.shift()
        used.shift()
      }
      // The first answer is known at once: its level is drawn across the box, filled, rather than
      // one dot at its edge; the next samples draw the trend from there.
      plot.setData(times.length === 1 ? [[times[0] - 60, times[0]], [used[0], used[0]]] : [times, used])
      const low = Math.min(...used)
      const high = Math.max(...used)
      const minutes = Math.max(1, Math.round((times[times.length - 1] - times[0]) / 60))
      const label = times.length === 1 ? `Spool use now: ${formatBytes(high)} (its trend follows)` : `Spool use over the last ${minutes} min: from ${formatBytes(low)} to ${formatBytes(high)}`
      element.setAttribute('aria-label', label)
      element.title = label
    },
  }
}
