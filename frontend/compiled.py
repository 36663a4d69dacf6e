"""`frontend.compile`: an nn.Module to a model that runs on the simulated fabric."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterable, Sequence

import torch

from fabric import host_io_cycles
from fabric.config import FabricConfig
from fabric.kernels import WordMap
from frontend.amp import HalfDtype, check_precision, node_formats, resolve_half, traced_formats
from frontend.build_keys import shared_builds
from frontend.capture import Captured, capture_module
from frontend.color_fit import check_period_share
from frontend.errors import FrontendError, PlacementError
from frontend.fan_out import stage_edges
from frontend.gc_paused import gc_paused
from frontend.graph_colors import (
    DEFAULT_COLOR_POLICY,
    GraphColors,
    check_color_policy,
    graph_colors,
)
from frontend.integer_ranges import check_integer_input, check_integer_nodes
from frontend.lowering import Lowered, check_experts, check_gemm_orientation, check_lookups
from frontend.micro_batches import join, split
from frontend.model_program import ModelProgram, build_model_program
from frontend.nan_rankings import check_rankings, nan_guards
from frontend.pipelined_fit import fit_pipelined, lower_graph
from frontend.placement import place
from frontend.program_calls import (
    DEFAULT_SIMULATION,
    ProgramCall,
    call_program,
    check_simulation,
    run_calls,
)
from frontend.program_calls import host_cycles as program_host_cycles
from frontend.program_calls import period as program_period
from frontend.program_run import ProgramStream, host_link, run_stream
from frontend.resident_moves import check_home, restore, route_from_home
from frontend.runtime import Execution, ResidentTensor, call_programs, prepare
from frontend.schedule import DEFAULT_MODE, Timeline, check_mode, timeline
from frontend.tables import table_rows, widest
from frontend.validate import golden_values, validate
from frontend.values import Ref


def compile(model: torch.nn.Module, example_inputs: Sequence,  # noqa: A001 (public name)
            config: FabricConfig | None = None, max_cycles: int = 5_000_000,
            precision: str = "fp32", half=None, mode: str = DEFAULT_MODE,
            colors: str = DEFAULT_COLOR_POLICY,
            period_share: float | None = None, lookups: str = "gather",
            gemm_orientation: str = "rows", experts: str = "picked",
            simulate: str = DEFAULT_SIMULATION) -> CompiledModel:
    """Capture `model` on `example_inputs`, lower it to fabric kernels, place them on
    `config` (default `FabricConfig.small(32, 32)`) and prepare the data movement.

    precision: "fp32" (every node in the dtype the model gives it: fp32, or for a model
        of float16 or bfloat16 tensors that format, `frontend.amp.traced_formats`), or
        "mixed": nodes follow PyTorch's CPU autocast rules in a 16-bit format, see
        `frontend.amp`.
    half: that format under "mixed" ("float16", "bfloat16", "cbfloat16"); default the one
        of `frontend.amp.set_half_dtype` (float16 unless set), read now.
    mode: how a call's parts follow one another in time, see `frontend.schedule`:
        "pipelined" (the default, how a wafer runs a model: every stage resident and
        running as soon as its data is in, samples streamed through with
        `CompiledModel.stream`; tiles sized to balance the stages' predicted cycles; a GEMM
        whose single tile the colors bind spreads its output columns over several tiles,
        `frontend.gemm_split`) or "sequential" (one stage at a time, the rest of the fabric
        idle: a stage studied alone). The outputs are the same up to the order of sums in
        kernels placed on other tiles.
    colors: "pipelined" only, where every stage's kernel and every move are on the fabric
        at once: their routes get colors over the whole graph (`frontend.graph_colors`,
        `cm.colors`). A model whose balanced tiles the fabric's colors cannot hold is
        refused with a PlacementError ("refuse"), placed again on smaller tiles until they
        can ("fit", `frontend.color_fit`: a pipeline that runs as one fabric program,
        `cm.one_program`, often slower; refused when even the smallest tiles need more),
        or compiled on its balanced tiles anyway with the shortfall in `cm.colors` and
        `cm.report()` ("report", the default: the figures of the balanced pipeline, which
        `cm.one_program` then refuses, naming the colors short); its parts are simulated
        apart, each with its own colors, in every mode.
    period_share: "pipelined" only: the share of the fabric's PEs the tiles may take
        while the period is set (`frontend.balance`; default `PERIOD_SHARE`, 0.6): more
        gives a lower period (a higher rate) and fewer spare PEs for the latency (TinyGPT
        d=64 on small(32, 32): 1.0 gives 4,930 cycles per sample and a latency of 50,133,
        0.6 5,330 and 43,755).
    lookups: how an embedding by an integer input's indices (token ids) is looked up:
        "gather" (the default: the rows the ids pick move per call from a resident copy of
        the table, over routes the host plans per call) or "onehot" (on the fabric, a
        one-hot product of tokens x vocab x (dim + 1) multiply-adds, exact in fp32: a
        static model that one fabric program holds, `cm.one_program`; for small
        vocabularies). Either way an index outside the table raises IndexError before the
        call, as eager does.
    gemm_orientation: "rows" (the default: each SUMMA tile splits C's rows over its rows,
        its fmas running down columns of m / R elements) or "auto" (each tile in the
        orientation its model predicts faster there: C^T = B^T A^T where C has few rows
        and many columns, its fmas along C's rows; the words are the same bit for bit,
        `fabric.kernels.build_gemm_summa`). Products of one row are GEMVs either way.
    experts: how a product with expert weights picked per token by indices computed on the
        fabric (a mixture-of-experts layer: bmm(W[ids], x)) runs: "picked" (the default:
        the weights looked up by a one-hot product, then a small product per token) or
        "dense" (every token's row times every expert's weights in one GEMM, a mask
        keeping each token's own; the same values up to the order of sums): Mixtral and
        Qwen2-MoE then fit one fabric program with colors "fit", where the picked
        products' all-to-all moves need more colors than a fabric has
        (`frontend.lowering.experts`).
    simulate: how a pipelined call is simulated (`frontend.program_calls`): "parts" (the
        default: each part on its own, their overlap scheduled) or "program" (the model's
        one fabric program, built now, a call or a stream one engine run of it: kernels
        started by their data, parts contending for the fabric, the host link in the
        stream; refused with a PlacementError when one program cannot hold the model).

    The returned model runs on the simulated fabric when called; shapes are those of the
    example inputs (as `torch.export` captures them)."""
    config = config or FabricConfig.small(32, 32)
    half = resolve_half(precision, half)
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor) and x.numel() == 0:
            raise FrontendError(f"example input {i} has shape {tuple(x.shape)}, no elements: "
                                "the fabric holds every tensor in PE memory, so each needs at "
                                "least one element (a batch size of at least 1)")
    return CompiledModel(capture_module(model, example_inputs), config, max_cycles,
                         precision, example_inputs, half, mode, colors, period_share, lookups,
                         gemm_orientation, experts, simulate)


def compiling(init):
    """`init` (a compile: `CompiledModel.__init__`) run with the cyclic collector paused
    (`frontend.gc_paused`) and the stages that build alike sharing their kernels' weighing
    and probes (`frontend.build_keys.shared_builds`)."""
    @functools.wraps(init)
    def run(*args, **kwargs):
        with gc_paused(), shared_builds():
            return init(*args, **kwargs)
    return run


class CompiledModel:
    """A model lowered, placed and ready to run on a simulated fabric."""

    @compiling
    def __init__(self, captured: Captured, config: FabricConfig, max_cycles: int,
                 precision: str = "fp32", example_inputs: Sequence = (),
                 half: HalfDtype | None = None, mode: str = DEFAULT_MODE,
                 colors: str = DEFAULT_COLOR_POLICY, period_share: float | None = None,
                 lookups: str = "gather", gemm_orientation: str = "rows",
                 experts: str = "picked", simulate: str = DEFAULT_SIMULATION):
        """half: the 16-bit format of a "mixed" model (`frontend.amp.resolve_half`);
        None in fp32 (a model of 16-bit tensors then gets `stored_half`, its format, and
        each node its traced dtype's, `frontend.amp.traced_formats`). mode: "sequential"
        or "pipelined" (`frontend.schedule`). colors: what a pipelined model short of
        colors gets, "fit", "refuse" or "report" (`compile`).
        period_share: the pipelined placement's (`compile`). lookups: "gather" or
        "onehot", how embeddings by token ids are looked up (`compile`). gemm_orientation:
        "rows" or "auto", which way SUMMA tiles run their fmas (`compile`). experts:
        "picked" or "dense", how products with picked expert weights run (`compile`).
        simulate: "parts" or "program", how a pipelined call is simulated (`compile`)."""
        t0 = time.perf_counter()
        try:
            self.mode = check_mode(mode)
            self.color_policy = check_color_policy(colors)
            share = check_period_share(period_share, self.mode)
            self.lookups = check_lookups(lookups)
            self.gemm_orientation = check_gemm_orientation(gemm_orientation)
            self.experts = check_experts(experts)
            self.simulate = check_simulation(simulate, self.mode)
        except ValueError as exc:
            raise FrontendError(str(exc)) from None
        self.captured = captured
        self.resident_inputs: set[str] = set()  # inputs that live in PE memory
        self.resident_homes: dict[str, WordMap] = {}  # ... and their homes' maps
        self.config = config
        self.max_cycles = max_cycles
        self.precision = check_precision(precision)
        if (half is None) != (precision == "fp32"):
            raise FrontendError(f"precision {precision!r} with half dtype "
                                f"{getattr(half, 'name', None)!r}: a mixed model needs one "
                                "(frontend.amp.resolve_half), an fp32 model none")
        self.half = half
        if example_inputs and not self.half:
            # eager's checks first (a float layer refuses integer ids): what eager refuses
            # is refused here too, never run on the fabric with the bits reinterpreted
            golden_values(captured, self._named_inputs(example_inputs))
        # a model of 16-bit tensors in precision "fp32": each node in its own dtype
        self.formats, self.stored_half = (
            (node_formats(captured, self._named_inputs(example_inputs), self.half), None)
            if self.half else traced_formats(captured))
        def lower_with(gemm_parts) -> Lowered:  # GEMMs cut by gemm_parts (None: none)
            return lower_graph(captured, self.formats, gemm_parts, self.lookups,
                               self.gemm_orientation, self.experts)

        # a pipeline runs at its slowest stage's rate: balance the stages' cycles; one stage
        # at a time, their sum: shares that follow the work
        # pipelined: every part on the fabric at once, so their routes share its colors
        self.colors: GraphColors | None = None
        if self.mode == "pipelined":
            self.lowered, fit = fit_pipelined(lower_with, config, colors, share, captured,
                                              self.experts)
            self.placement, self.prepared, self.colors = fit.placement, fit.prepared, \
                fit.colors
            # colors="fit" may add fan-out relays: stages of their own (`frontend.fan_out`)
            self.lowered = dataclasses.replace(self.lowered, stages=fit.stages,
                                               tensors=fit.tensors)
            self.edges = fit.edges
        else:
            self.lowered = lower_with(None)
            self.edges = stage_edges(self.lowered.stages, self.lowered.tensors)
            self.placement = place(self.lowered.stages, config, self.edges, balance="work")
            self.prepared = prepare(self.lowered.stages, self.placement.rects,
                                    self.lowered.tensors, config)
        # integers computed from integer inputs, checked against 2^24 before every call
        self.integer_nodes = self.lowered.integer_nodes
        self.nan_guards = nan_guards(captured.graph, self.lowered.env)  # checked per call
        self.table_rows = table_rows(config, call_programs(self.prepared))
        self.output_reads = _output_reads(self)
        # (gated, holds) -> the model as one fabric program, built once (`model_program`)
        self._programs: dict[tuple[bool, bool], ModelProgram] = {}
        self.last: Execution | None = None
        self.last_inputs: dict[str, torch.Tensor] | None = None
        self.timeline: Timeline | None = None  # of the last call or stream (simulated by parts)
        # simulate="program": the one program every call runs in, and the last run of it
        self.call_program = (call_program(self.model_program, self.colors)
                             if self.simulate == "program" else None)
        self.program_stream: ProgramStream | None = None
        self.compile_s = time.perf_counter() - t0

    # ---- resident inputs ---------------------------------------------------------------------
    def make_resident(self, name: str, home: WordMap) -> int:
        """Input `name` will live in PE memory in the layout `home` (in the input's element
        order): every operand it feeds gets it over the mesh from there, by a plan made
        now, instead of from the host. Afterwards `run` takes it as a `ResidentTensor` in
        `resident=`, not among the positional inputs. Returns the number of operands fed."""
        check_home(self.captured, self.lowered.tensors, name, home)
        replaced = route_from_home(self.prepared, self.config, name, home)
        before = self.colors, self.resident_homes
        self.resident_homes = {**self.resident_homes, name: home}
        try:
            if self.mode == "pipelined":  # the new moves share the fabric's colors too
                self.colors = graph_colors(self.prepared, self.config, self.color_policy)
            self._programs.clear()
            if self.simulate == "program":  # the one program holds the home as a part
                self.call_program = call_program(self.model_program, self.colors)
        except FrontendError:
            restore(replaced)
            self.colors, self.resident_homes = before
            raise
        plans = [sources[i].plan for sources, i, _ in replaced]
        self.resident_inputs.add(name)
        # only the new moves' programs can need larger tables
        rows = table_rows(self.config, [r.program for plan in plans for r in plan.rounds])
        self.table_rows = widest(self.table_rows, rows)
        return len(plans)

    # ---- running ---------------------------------------------------------------------------
    def _tensor_args(self, args) -> list:
        """The call's inputs (`args` flattened), less those the model was compiled with as
        other than tensors (`Captured.fixed_inputs`: None for an optional argument), each
        checked to be what it was then."""
        fixed = self.captured.fixed_inputs
        names = [n for n in self.captured.call_order if n not in self.resident_inputs]
        flat, _ = torch.utils._pytree.tree_flatten(list(args))
        if len(flat) != len(names):
            raise FrontendError(f"the model was compiled for {len(names)} inputs "
                                f"({', '.join(names)}), got {len(flat)}")
        for name, value in zip(names, flat):
            if name in fixed and not (value is fixed[name] or (
                    not isinstance(value, torch.Tensor) and value == fixed[name])):
                raise FrontendError(f"input {name!r} was {fixed[name]!r} when the model was "
                                    f"compiled, got {_describe_value(value)}: export fixes "
                                    "inputs other than tensors in the graph; compile "
                                    "again with the new value")
        return [value for name, value in zip(names, flat) if name not in fixed]

    def _with_fixed(self, tensors) -> tuple:
        """A call's inputs in call order from its input tensors (resident ones left out),
        the fixed inputs put back where the model takes them."""
        tensors = iter(tensors)
        fixed = self.captured.fixed_inputs
        return tuple(fixed[n] if n in fixed else next(tensors)
                     for n in self.captured.call_order if n not in self.resident_inputs)

    def _named_inputs(self, args) -> dict[str, torch.Tensor]:
        names = [n for n in self.captured.user_inputs if n not in self.resident_inputs]
        out = {}
        for name, value in zip(names, self._tensor_args(args)):
            want = self.captured.graph.find_nodes(op="placeholder", target=name)[0].meta["val"]
            if not isinstance(value, torch.Tensor):
                raise FrontendError(f"input {name!r} must be a tensor, got {type(value)}")
            if tuple(value.shape) != tuple(want.shape) or value.dtype != want.dtype:
                batch = (f"; a call on k x {want.shape[0]} along dimension 0 runs as k "
                         "micro-batches" if want.dim() else "")
                raise FrontendError(f"input {name!r} is {tuple(value.shape)} {value.dtype}; "
                                    f"the model was compiled for {tuple(want.shape)} "
                                    f"{want.dtype} (shapes are static{batch})")
            check_integer_input(name, value)
            out[name] = value.detach()
        return out

    def _inputs(self, args) -> dict[str, torch.Tensor]:
        """The runtime inputs of a call by name (`_named_inputs`), the model's assertions on
        them held (RuntimeError, as eager: `asserts`) and the indices that embeddings read
        checked against their tables (IndexError, as eager); the integers the model computes
        from them held within 2^24 (`integer_ranges`)."""
        inputs = self._named_inputs(args)
        for assertion in self.lowered.input_assertions:
            assertion.verify(inputs)
        for indices in self.lowered.index_ranges:
            indices.values(inputs)
        check_integer_nodes(self.integer_nodes, inputs, self.captured.constants)
        return inputs

    def run(self, *args, resident: dict[str, ResidentTensor] | None = None) -> Execution:
        """Run once on `args` (the runtime inputs, resident ones left out) and `resident`
        {input name: its words in PE memory} for every input made resident."""
        inputs = self._inputs(args)
        resident = self._resident_words("run", resident)
        if self.simulate == "program":
            return self._run_program([inputs], resident)[-1]
        self.last = Execution(self.config, self.prepared, self.lowered.tensors, inputs,
                              self.max_cycles, self.table_rows, resident)
        self.last_inputs = inputs
        self.timeline = timeline(self.mode, [self.last.results], self.output_reads,
                                 self.config.sram_bytes)
        check_rankings(self.nan_guards, self.last.value)
        return self.last

    def __call__(self, *args, resident: dict[str, ResidentTensor] | None = None):
        """The model's outputs on `args`; on k times the batch it was compiled for (every
        input k times as long along dimension 0), k micro-batches streamed through it and
        their outputs joined (`frontend.micro_batches`; the figures are the stream's)."""
        names = [n for n in self.captured.user_inputs if n not in self.resident_inputs]
        shapes = [tuple(self.captured.graph.find_nodes(op="placeholder", target=n)[0]
                        .meta["val"].shape) for n in names]
        batches = split(self._tensor_args(args), shapes) if not resident else None
        if batches is None:
            self.run(*args, resident=resident)
            return self.outputs()
        return join(self.stream([self._with_fixed(b) for b in batches]), shapes[0][0])

    def _resident_words(self, what: str, resident: dict[str, ResidentTensor] | None
                        ) -> dict[str, ResidentTensor]:
        """`resident` as a dict, FrontendError (led by `what`) unless it holds the words
        of exactly the inputs made resident."""
        resident = dict(resident or {})
        if set(resident) != self.resident_inputs:
            raise FrontendError(f"{what}: resident inputs {sorted(self.resident_inputs)} need "
                                f"their words, got {sorted(resident)}")
        return resident

    def one_program(self, *args, overlap: bool = False) -> ProgramStream:
        """Run once on `args` as one fabric program (pipelined mode; `frontend.model_program`,
        `frontend.program_run`). overlap False: the parts one at a time, which gives the
        words `run` gives bit for bit and each part about the cycles it takes alone (flows
        sharing a link take turns in the order of their colors, which the graph's
        assignment renames); True: every part started as soon as the parts it reads are done
        (the host looks every few cycles), independent parts at once, contending for PEs
        and links as the engine simulates."""
        return self.one_program_stream([args], start="part" if overlap else "serial")

    def one_program_stream(self, samples: Iterable[Sequence], start: str = "part",
                           host_io: bool = False, resident: dict[str, ResidentTensor]
                           | None = None) -> ProgramStream:
        """`samples` (each a tuple of runtime inputs, as a call takes them) streamed
        through the one fabric program: each part starts on a sample as soon as its inputs
        for it are in and the next part is done with what it overwrites (`frontend.
        program_run`), so consecutive samples overlap in one engine run. `.words[s]` every
        stage's output words of sample s; `.latency`, `.period` (cycles per sample between
        the first and last samples' ends), `.spans`. start: "part" (a part on all its PEs
        once the parts it reads are done), "pe" (on each PE once they are done on that PE),
        "data" (as "pe", but a kernel's PEs that moves deliver to are started by the last
        delivery there, in the fabric, not by the host: the program with gates) or
        "serial" (one part at a time). host_io: the host link's writes of each sample's
        inputs and reads of the outputs, overlapping the fabric's work and counted where
        they hold it up, as in the pipelined timeline (`frontend.program_run`, "Host
        I/O"); False: apart (the fabric's cycles alone). resident: the words of every
        input made resident (`make_resident`), placed in their homes before the run."""
        program = self.model_program(gated=start == "data", input_buffers=host_io)
        inputs = [self._inputs(args) for args in samples]
        if not inputs:
            raise FrontendError("one_program_stream: no samples given")
        return run_stream(program, inputs, self.max_cycles, start=start,
                          host=host_link(program, self.output_reads) if host_io else None,
                          resident={k: r.words for k, r in (resident or {}).items()})

    def model_program(self, gated: bool = False, holds: bool = True,
                      input_buffers: bool = False) -> ModelProgram:
        """The model as one fabric program (`frontend.model_program`), built once per
        kind: with gated, each kernel that moves deliver to is started by its data (start
        "data"); with holds (the default), each skip connection's move gets the holds its
        path needs (`frontend.skip_holds`); with input_buffers, each user input a second
        buffer that the host writes while its kernel computes (`InputBuffer`), where the
        PEs' SRAM holds them all (else the program without: its `inputs` empty).

        Raises FrontendError for a model not compiled in pipelined mode; PlacementError
        when it does not fit one program (`build_model_program`)."""
        if self.mode != "pipelined":
            raise FrontendError("one_program: the model was compiled in mode "
                                f"{self.mode!r}; one fabric program holds a pipelined model "
                                "(every stage on its own tile)")
        key = (gated, holds, input_buffers)
        if key not in self._programs:
            try:
                self._programs[key] = build_model_program(
                    self.prepared, self.colors, gated=gated, holds="auto" if holds else {},
                    input_buffers=input_buffers, resident=self.resident_homes)
            except PlacementError:
                if not input_buffers:
                    raise
                self._programs[key] = self.model_program(gated, holds)
        return self._programs[key]

    def stream(self, samples: Iterable[Sequence], resident: dict[str, ResidentTensor] | None
               = None) -> list:
        """Feed `samples` (each a tuple of runtime inputs, as a call takes them) one after
        another and return their outputs in order. The figures (`cycles`, `period`,
        `utilization`, `timeline`) are those of the whole stream in the model's mode: in
        "pipelined" mode the samples overlap on the resident stages, so the period is the
        steady state's cycles per sample."""
        calls, outputs = [], []
        if self.simulate == "program":
            for i, args in enumerate(samples):
                try:
                    calls.append(self._inputs(args))
                except FrontendError as exc:
                    raise type(exc)(f"sample {i} of the stream: {exc}") from None
            if not calls:
                raise FrontendError("stream: no samples given")
            for call in self._run_program(calls, self._resident_words("stream", resident)):
                self.last = call
                outputs.append(self.outputs())
            return outputs
        for i, args in enumerate(samples):
            try:
                self.run(*args, resident=resident)
            except FrontendError as exc:  # of its kind (an IntegerRangeError stays one)
                raise type(exc)(f"sample {i} of the stream: {exc}") from None
            calls.append(self.last.results)
            outputs.append(self.outputs())
        if not calls:
            raise FrontendError("stream: no samples given")
        self.timeline = timeline(self.mode, calls, self.output_reads, self.config.sram_bytes)
        return outputs

    def _run_program(self, samples: list[dict[str, torch.Tensor]],
                     resident: dict[str, ResidentTensor]) -> list[ProgramCall]:
        """`samples` (user inputs by graph name) streamed through the call program in one
        engine run with the `resident` inputs' words in their homes (`frontend.
        program_calls`); the last sample's call becomes `last`."""
        calls = run_calls(self.call_program, samples, self.lowered.tensors,
                          self.output_reads, self.max_cycles, resident)
        self.program_stream, self.timeline = calls[0].stream, None
        self.last, self.last_inputs = calls[-1], calls[-1].inputs
        for i, call in enumerate(calls):
            check_rankings(self.nan_guards, call.value, i if len(calls) > 1 else None)
        return calls

    def outputs(self):
        """The model's outputs (torch tensors, the model's structure) of the last call."""
        self._need_run()
        ex = self.last
        outs = []
        for v, node in zip(self.lowered.outputs, _output_args(self.captured)):
            if isinstance(v, Ref):  # a Ref comes from a graph node
                dtype = self._output_dtype(node.name, node.meta["val"].dtype)
                outs.append(ex.value(v.index).to(dtype))
            elif hasattr(v, "value"):
                outs.append(v.value.clone())
            elif v is None or isinstance(v, (bool, int, float)):  # (x, None), as returned
                outs.append(v)
            else:
                raise FrontendError(f"output of type {type(v).__name__} is not supported")
        return torch.utils._pytree.tree_unflatten(outs, self.captured.out_spec)

    def _output_dtype(self, node: str, traced: torch.dtype) -> torch.dtype:
        """An output's dtype: the traced one, or under mixed precision the half dtype where
        autocast gives it (cbfloat16, which torch lacks, comes back as its exact fp32
        values)."""
        if self.half is None or self.formats.get(node) != self.half.fabric:
            return traced
        return self.half.torch_dtype or torch.float32

    # ---- figures ---------------------------------------------------------------------------
    @property
    def cycles(self) -> int:
        """Simulated cycles of the last call. Sequential: its kernels and data movement
        summed (host I/O apart, `host_cycles`). Pipelined: its latency, from the first
        input word the host writes to the last output word it reads, stages overlapping
        where the dataflow lets them (host I/O on that path included); for a stream, the
        first sample's (`latency`, and `period` for the rate)."""
        self._need_run()
        if self.mode == "pipelined":
            return self.latency
        return sum(r.kernel_cycles + r.move_cycles for r in self.last.results)

    @property
    def latency(self) -> int:
        """Cycles from the first input word written to the first sample's last output word
        read by the host, in the model's mode."""
        self._need_run()
        return self.program_stream.latency if self.timeline is None else self.timeline.latency

    @property
    def period(self) -> float:
        """Cycles per sample of the last call or stream in steady state (`frontend.schedule`;
        one call in pipelined mode: the slowest stage's rate; simulated as one program,
        its longest part's cycles, `frontend.program_calls.period`)."""
        self._need_run()
        return program_period(self.call_program, self.program_stream) if self.timeline is None \
            else self.timeline.period

    @property
    def load_cycles(self) -> int:
        """Host cycles of loading every stage's constants (weights): once per model in
        pipelined mode, where the stages stay resident."""
        self._need_run()
        if self.simulate == "program":
            return self.call_program.load_cycles()
        return sum(r.load_cycles for r in self.last.results)

    @property
    def host_cycles(self) -> int:
        """Host cycles of the last call: the loads and the inputs' writes (simulated as one
        program: the loads, and the first sample's writes and reads on the host link)."""
        self._need_run()
        if self.simulate == "program":
            return self.load_cycles + program_host_cycles(self.program_stream)
        return sum(r.host_cycles for r in self.last.results)

    @property
    def fmas(self) -> int:
        return sum(s.fmas for s in self.lowered.stages)

    @property
    def half_storage(self) -> HalfDtype | None:
        """The 16-bit format the model's nodes are stored in: mixed precision's, or that of
        a model of 16-bit tensors (`stored_half`); None when every node is fp32."""
        return self.half or self.stored_half

    @property
    def utilization(self) -> float:
        """Useful multiply-adds over the whole fabric's fma peak: the fp32 peak, or under
        mixed precision or for a model of 16-bit tensors the 16-bit one (4 per PE-cycle on
        WSE-2). Sequential: for the cycles of the call; pipelined: for the period (a
        sample's multiply-adds per steady state cycles per sample)."""
        dtype = "f16" if self.half_storage else "f32"
        peak = self.config.simd_width("fma", dtype) * self.config.rows * self.config.cols
        cycles = self.period if self.mode == "pipelined" else self.cycles
        return self.fmas / (peak * max(1.0, cycles))

    def _need_run(self):
        if self.last is None:
            raise FrontendError("call the compiled model first (no run yet)")

    def report(self) -> str:
        from frontend.report import report

        return report(self)

    def validate(self, *args, raise_on_mismatch: bool = True):
        return validate(self, args, raise_on_mismatch)

    def plot_placement(self, path=None):
        from frontend.report import plot_placement

        return plot_placement(self, path)


def _describe_value(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {tuple(value.shape)} {value.dtype} tensor"
    return repr(value)


def _output_args(captured: Captured) -> list:
    """The output node's arguments, flattened (FX nodes, or constants)."""
    out = captured.graph.find_nodes(op="output")[0]
    return torch.utils._pytree.tree_flatten(out.args[0])[0]


def _output_reads(cm: CompiledModel) -> dict[str, int]:
    """{stage: host cycles to read its output} for every stage whose output the model
    returns (in whole: the host reads the stage's output words from its tile)."""
    wanted = [v.index.reshape(-1) for v in cm.lowered.outputs if isinstance(v, Ref)]
    gids = torch.cat(wanted) if wanted else torch.zeros(0, dtype=torch.int64)
    reads = {}
    for p in cm.prepared:
        t = p.stage.tensor
        if bool(t.owns(gids).any()):
            reads[p.stage.name] = host_io_cycles(cm.config, p.out_map.rect,
                                                 p.out_map.widest_sram_words)
    return reads
