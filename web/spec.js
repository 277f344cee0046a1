// Reads the submit form into a job spec and checks it with the same rules
// tesserad applies (docs/rest-api.md, "POST /api/v1/jobs"), so most mistakes
// are shown before anything is sent. The server stays the authority: its
// errors name a field too and are shown the same way.

const NAME_RE = /^[A-Za-z0-9._-]{1,128}$/;
const ENTRYPOINT_RE = /^(builtin|cmd|model):[A-Za-z0-9._-]{1,128}$/;
const ENV_KEY_RE = /^[A-Z_][A-Z0-9_]*$/;
const RESERVED_ENV = new Set(['RANK', 'WORLD_SIZE', 'GROUP_RANK', 'GROUP_WORLD_SIZE', 'NODE_RANK',
                              'CUDA_VISIBLE_DEVICES']);
const RESERVED_ENV_PREFIXES = ['MASTER_', 'LOCAL_', 'ROLE_', 'TORCHELASTIC_', 'TESSERA_'];

// The image convention of an exported model (api/image_convention.h): what
// the module takes and gives. '' leaves a member to the module.
export const IMAGE_INPUTS = [['rgb', 'rgb (3 channels in the value range)'],
                             ['gray', 'gray (1 channel, luma in the value range)'],
                             ['l', 'l (1 channel, CIELAB lightness in [-1, 1])']];
export const IMAGE_OUTPUTS = [['rgb', 'rgb (3 channels in the value range)'],
                              ['gray', 'gray (1 channel in the value range)'],
                              ['ab', 'ab (CIELAB a, b joined with the input\'s L)'],
                              ['scores', 'scores (logits per image, a JSON file)']];
const MAX_ALIGN_PX = 1024;
const MAX_HALO_PX = 4096;
const MAX_RANGE = 1e6;

// The form fields: JobSpec keys and the members of spec.image, in form order.
export const FIELDS = ['name', 'kind', 'entrypoint', 'args', 'global_batch', 'steps', 'layout',
                       'image_input', 'image_output', 'image_range_lo', 'image_range_hi',
                       'image_align_px', 'image_halo_px',
                       'min_devices', 'max_devices', 'priority', 'max_attempts',
                       'checkpoint_every_s', 'dataset', 'output', 'checkpoint', 'env'];

// An API error's image member -> its form field.
const IMAGE_FIELDS = { input: 'image_input', output: 'image_output', range: 'image_range_lo',
                       align_px: 'image_align_px', halo_px: 'image_halo_px' };

// An exported model (a registered TorchScript or AOTInductor file).
export function isModelEntrypoint(entrypoint) {
  return String(entrypoint ?? '').trim().startsWith('model:');
}

// An API error field ("args[3]", "env.RANK", "global_batch", "image.range")
// -> form field.
export function formFieldOf(apiField) {
  if (!apiField) return null;
  const [base, member] = String(apiField).split(/[.[]/);
  if (base === 'image') return IMAGE_FIELDS[member] ?? 'entrypoint';
  return FIELDS.includes(base) ? base : null;
}

function numberField(raw, name, errors) {
  const s = String(raw ?? '').trim();
  if (s === '') return undefined;
  const v = Number(s);
  if (!Number.isFinite(v) || Math.abs(v) > MAX_RANGE) {
    errors[name] = 'Must be a number within ±1,000,000.';
    return undefined;
  }
  return v;
}

// spec.image from the form: only the members stated; undefined when none.
function imageConvention(values, errors) {
  const image = {};
  const input = String(values.image_input ?? '');
  if (input) {
    if (IMAGE_INPUTS.some(([v]) => v === input)) image.input = input;
    else errors.image_input = 'Must be rgb, gray or l.';
  }
  const output = String(values.image_output ?? '');
  if (output) {
    if (IMAGE_OUTPUTS.some(([v]) => v === output)) image.output = output;
    else errors.image_output = 'Must be rgb, gray, ab or scores.';
  }
  const lo = numberField(values.image_range_lo, 'image_range_lo', errors);
  const hi = numberField(values.image_range_hi, 'image_range_hi', errors);
  const loSet = String(values.image_range_lo ?? '').trim() !== '';
  const hiSet = String(values.image_range_hi ?? '').trim() !== '';
  if (loSet !== hiSet && !errors.image_range_lo && !errors.image_range_hi) {
    errors[loSet ? 'image_range_hi' : 'image_range_lo'] = 'Give both black and white, or neither.';
  } else if (lo !== undefined && hi !== undefined) {
    if (lo < hi) image.range = [lo, hi];
    else errors.image_range_hi = 'White must be above black.';
  }
  const align = intField(values.image_align_px, 'image_align_px', 1, MAX_ALIGN_PX, {}, errors);
  if (align !== undefined) image.align_px = align;
  const halo = intField(values.image_halo_px, 'image_halo_px', 0, MAX_HALO_PX, {}, errors);
  if (halo !== undefined) image.halo_px = halo;
  return Object.keys(image).length ? image : undefined;
}

function intField(raw, name, min, max, { required = false, def } = {}, errors) {
  const s = String(raw ?? '').trim();
  if (s === '') {
    if (required) errors[name] = 'Required.';
    return def;
  }
  if (!/^-?\d+$/.test(s)) {
    errors[name] = 'Must be a whole number.';
    return undefined;
  }
  const v = Number(s);
  if (v < min || v > max) {
    errors[name] = `Must be between ${min.toLocaleString('en')} and ${max.toLocaleString('en')}.`;
    return undefined;
  }
  return v;
}

// values: {field: string} from the form. Returns {spec, errors}; errors maps
// a field to a message and is empty when the spec may be sent.
export function buildSpec(values) {
  const errors = {};
  const spec = {};
  const name = String(values.name ?? '').trim();
  if (!name) errors.name = 'Required.';
  else if (!NAME_RE.test(name)) errors.name = 'Use 1–128 letters, digits, ".", "_" or "-".';
  spec.name = name;

  const kind = values.kind || 'train';
  spec.kind = kind;

  const entrypoint = String(values.entrypoint ?? '').trim();
  if (!entrypoint) errors.entrypoint = 'Required.';
  else if (!ENTRYPOINT_RE.test(entrypoint)) {
    errors.entrypoint = 'Must be builtin:<id>, cmd:<id> or model:<id>.';
  }
  spec.entrypoint = entrypoint;
  // An exported model: its weights inside, run whole per device.
  const model = isModelEntrypoint(entrypoint);

  const args = String(values.args ?? '').split('\n').map((a) => a.replace(/\r$/, ''))
    .filter((a) => a.trim() !== '');
  if (args.length > 64) errors.args = 'At most 64 arguments (one per line).';
  else if (args.some((a) => new TextEncoder().encode(a).length > 4096)) {
    errors.args = 'Each argument is at most 4096 bytes.';
  }
  if (args.length) spec.args = args;

  spec.global_batch = intField(values.global_batch, 'global_batch', 1, 1048576,
                               { required: true }, errors);
  // A cmd: script counts its own steps; builtin and exported models need them.
  const stepsRequired = kind === 'train' && (entrypoint.startsWith('builtin:') || model);
  spec.steps = intField(values.steps, 'steps', stepsRequired ? 1 : 0, 1e9,
                        { required: stepsRequired }, errors);
  if (spec.steps === undefined) delete spec.steps;

  const layout = values.layout || 'auto';
  if (layout === 'tiled' && kind !== 'infer') errors.layout = 'Tiled is for inference jobs only.';
  else if (model && kind === 'infer' && layout !== 'auto' && layout !== 'data') {
    errors.layout = 'A model: entrypoint infers as auto or data parallel.';
  }
  spec.layout = layout;
  if (model) {
    const image = imageConvention(values, errors);
    if (image) spec.image = image;
  }

  const minD = intField(values.min_devices, 'min_devices', 1, 4096, { def: 1 }, errors);
  const maxD = intField(values.max_devices, 'max_devices', 0, 4096, { def: 0 }, errors);
  if (minD !== undefined) spec.min_devices = minD;
  if (maxD !== undefined) {
    if (maxD !== 0 && minD !== undefined && maxD < minD && !errors.max_devices) {
      errors.max_devices = `Must be 0 (no limit) or at least min devices (${minD}).`;
    }
    spec.max_devices = maxD;
  }
  const prio = intField(values.priority, 'priority', -1000, 1000, {}, errors);
  if (prio !== undefined) spec.priority = prio;
  const attempts = intField(values.max_attempts, 'max_attempts', 1, 100, {}, errors);
  if (attempts !== undefined) spec.max_attempts = attempts;
  const every = intField(values.checkpoint_every_s, 'checkpoint_every_s', 1, 86400, {}, errors);
  if (every !== undefined) spec.checkpoint_every_s = every;

  // An exported model carries its weights: no checkpoint is sent.
  for (const f of model ? ['dataset', 'output'] : ['dataset', 'output', 'checkpoint']) {
    const v = String(values[f] ?? '').trim();
    if (v && !v.startsWith('/')) errors[f] = 'Must be an absolute path (starting with /).';
    else if (!v && kind === 'infer' && f !== 'checkpoint') errors[f] = 'Required for inference.';
    if (v) spec[f] = v;
  }

  const envText = String(values.env ?? '');
  const env = {};
  let count = 0;
  for (const [i, line] of envText.split('\n').entries()) {
    if (line.trim() === '') continue;
    const eq = line.indexOf('=');
    const key = (eq < 0 ? line : line.slice(0, eq)).trim();
    if (eq < 0) {
      errors.env = `Line ${i + 1}: write KEY=value.`;
      break;
    }
    if (!ENV_KEY_RE.test(key)) {
      errors.env = `Line ${i + 1}: "${key}" is not a valid name ([A-Z_][A-Z0-9_]*).`;
      break;
    }
    if (RESERVED_ENV.has(key) || RESERVED_ENV_PREFIXES.some((p) => key.startsWith(p))) {
      errors.env = `Line ${i + 1}: ${key} is reserved; Tessera sets it.`;
      break;
    }
    env[key] = line.slice(eq + 1);
    count++;
  }
  if (!errors.env && count > 64) errors.env = 'At most 64 variables.';
  if (count) spec.env = env;
  return { spec, errors };
}
