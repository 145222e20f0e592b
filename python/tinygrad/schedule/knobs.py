"""The tuning knobs of scheduling and kernel optimization, in one place: the numbers the scheduler, the codegen heuristics and the C
renderer compare against, each with what it trades off and its unit. Format constants (a GPU's three launch dims, the names generated
code uses) stay with their code; the BEAM search's settings are the BEAM_* environment variables of codegen/opt/search.py.

It lives in the scheduler's layer, the lowest that reads any of them (codegen and the renderers import it from here). Users import a knob
by name, so a test may patch it on the module that reads it. A knob the environment may set is a ContextVar with tinygrad 0.14's name
for it; one the scheduler reads is in the schedule cache's key (schedule/__init__.py PLAN_SETTINGS), so a plan is never replayed
under another value."""
from tinygrad.helpers import ContextVar

# ***** the scheduler: which values get a buffer (schedule/rangeify.py BUFFER_RULES) *****
# An elementwise value under an EXPAND is computed again for each element it is expanded to. It stays fused (no kernel more) unless:
MIN_RECOMPUTE = 8               # recomputations per element (the EXPANDs' factor) from which the next two limits apply
MAX_FUSED_READS = 4             # buffers such a value may read (fewer kernels vs its loads repeated per recomputation)
MAX_FUSED_OPS = 32              # ALU ops it may take (fewer kernels vs its arithmetic repeated; gelu takes 59)
MANY_RECOMPUTES = 128           # recomputations per element from which the total below applies (attention's p, 64 in p @ v, stays)
MIN_RECOMPUTED_SIZE = 1 << 12   # elements of a value from which the total below applies (smaller: each would be a kernel of its own)
MAX_RECOMPUTED_OPS = 1 << 24    # recomputed ALU ops in all (ops x elements x recomputations) before the value gets a buffer
MIN_SHARED_REDUCE = 16          # elements summed per output from which a reduce that two kernels compute gets a buffer (a kernel more
                                # vs the reduce run in each)

# ***** the scheduler: one kernel's loops (schedule/rangeify.py) *****
MAX_INDEX_USES = 16             # distinct indices one value is read at in a kernel before it gets a buffer (kernel size, exponential
                                # in a chain like x + x.flip(0), vs a kernel more; an UNROLL range's lanes count once)
REDUCE_UNROLL = 4               # reduce elements per loop iteration, a power of two (fewer iterations and a tree of adds vs code size)
DECODE_UNROLL = 16              # the same for a sum of values decoded from packed integers or halves (a quantized weight's blocks of 32 elements
                                # share their scale: decoded once per iteration, and the C compiler vectorizes the byte lanes) vs code size
REDUCE_STAGE = 1 << 14          # elements of a float sum past which it is nested reduces (accuracy of the sum vs loop overhead)
STAGE_BITS = 9                  # each level of such a sum over at most 2**STAGE_BITS elements (or the fewest levels of about equal size)
STAGE_LANES = 16                # accumulators of its innermost level, a power of two <= 2**STAGE_BITS (parallel adds vs registers)
# elements of a float sum (per result) from which, with at most SPLIT_MAX_OUT results, its outer stage is a kernel of its own whose
# partial sums run on every core (all cores summing vs a kernel more); tinygrad 0.14's REDUCEOP_SPLIT_THRESHOLD sets it
SPLIT_MIN = ContextVar("REDUCEOP_SPLIT_THRESHOLD", 1 << 20)
SPLIT_MAX_OUT = 4               # results of a sum at most for that split (more results already give every core work)
STREAM_CORES = 2                # cores up to which one core streams memory about as fast as all of them: a sum of stored values stays
                                # one kernel there (no partial sums written and read again)
SCHEDULE_CACHE_SIZE = 1024      # schedules the schedule cache keeps, least recently used dropped first (memory vs scheduling again)

# ***** codegen: splitting ranges (codegen/split_ranges.py) *****
MAX_STORES = 32                 # stores a kernel is split into at most (a cat of many tensors stays one loop past that: code size
                                # vs the masks compared in the loop)
SPLIT_REDUCE_MIN_WORK = 1 << 29  # iterations (all ranges) of a reduce kernel before it is split (as TILE_MIN_WORK: compile vs run time)

# ***** codegen: limits on the opts (codegen/opt/kernel.py apply_opt) *****
# The expander copies a kernel's body once per UPCAST and UNROLL lane, so code size, compile time and register pressure grow with them.
MAX_UPCAST = 16                 # lanes of one UPCAST (the widest vector access)
MAX_UNROLL = 32                 # lanes of one UNROLL (as tinygrad 0.14)
MAX_UPCAST_LANES = 256          # UPCAST lanes in all (the outputs one thread computes, each with its accumulator): the largest CPU
                                # register file holds 512 floats (32 AVX-512 registers x 16), so a 16x16 register tile already spills
MAX_UNROLL_LANES = 128          # UNROLL lanes of one reduce (values combined per loop step): the scheduler's unroll of 4 x a full 32
# operations of the body as the renderer writes it out (each once per combination of the lanes it depends on): lanes multiply across
# nested reduces (three nested reduces, each fully unrolled, would be 24*24*32 copies)
MAX_EXPANDED_OPS = 4096
PACK_MAX_BYTES = 512 << 10      # bytes of a packed panel, an array on the stack of the launch's thread (a 3x3 conv's 16 output channels
                                # of 512 input channels: 288 KB)

# ***** codegen: the CPU heuristic (codegen/opt/heuristic.py) *****
THREAD_MIN_WORK = 1 << 16       # elements of work (output elements x reduce trip count) before a kernel is threaded (launch cost vs
                                # cores idle)
THREAD_MAX = 32                 # launches of a threaded kernel at most
UPCAST = 4                      # lanes the innermost output loop (and a tap's, a channel's) is upcast by: vector width vs code size
OUTER_FULL_MAX = 8              # upcast_outer: an outer loop this short that UPCAST doesn't divide is upcast fully
DECODED_ROWS = 4                # decoded_rows_tile: rows of x that share each decoded weight element (registers: one accumulator per row)
TILE_LANES = (16, 8)            # register_tile: lanes of the innermost output loop (16, else 8)
TILE_ROWS = 8                   # and rows of the loop sharing its loads
TILE_BUDGET_ROWS = (4, 2)       # and fewer where 8 rows' body passes MAX_EXPANDED_OPS (a linear layer's gelu after the tile)
# multiply-adds (all ranges) before a @ b gets the register tile, else the 4x4 upcast: written as vector accumulators (codegen/expander.py)
# the tile compiles about as fast as the upcast and runs faster down to BERT-sized matmuls (benches/README.md, bench_onnx)
TILE_MIN_WORK = 1 << 24
# x @ w.T's packed tile (w's panel packed transposed) and peeled_tile's conv tile from this many: their code is several times longer,
# lowering and compile time that only a kernel this big pays back within a few runs; smaller x @ w.T keep dot_tile (faster there)
# and their cold compile time
TILE_DOT_MIN_WORK = 1 << 29
TILE_PANEL_BYTES = 8 << 20      # B (reduce x j elements) bigger than this: 32 lanes and the j blocks outside the i blocks (cache reuse)
GATHER_MIN_WORK = 1 << 22       # gather_tile: multiply-adds (all ranges) before a kernel with gated loads gets its tile
CHANNEL_LANES = (16, 8)         # channel_tile: output channels per step, one vector (an AVX-512 register) of packed weights; 8 where
                                # 16 would pass MAX_EXPANDED_OPS (a ResNet block's second conv with its shortcut conv fused in)
CHANNEL_J_LANES = (8, 7, 6, 5, 9, 10)  # and pixels of an image row per step (the first that divides the row), each a broadcast input
                                # times that vector into its accumulator (7x7 and 14x14 images: 7; 4 accumulators wait on their adds:
                                # not 4; benches/README.md, Design measurements)
CHANNEL_MIN_REDUCE = 256        # elements summed per output before channel_tile (ResNet's 7x7 stem conv of 3 channels, 147: gather_tile's
                                # 8 lanes; its 114-wide output padded for a max-pool, where gather_tile gets 2 lanes: 6 lanes here)
CHANNEL_WINDOW_RATIO = 4        # channel_tile: a conv's pixel step over its window's step at most this (a stride or dilation of 4)
PEEL_LANES = 128                # peeled_tile: lanes of its tile (j's times i's)
PEEL_J_LANES = (16, 8, 4)       # and j's lanes (a 28-wide image: 4, float4 loads, x 16 channels, instead of its 4x4 upcast)
PEEL_MAX_ROWS = 16              # i's lanes at most (64 float4 accumulators; 32 rows spill, which is slower)
GATHER_J_LANES = (8, 4, 2)      # gather_tile: j's lanes; 4 or 2 only for rows image_tile doesn't take (a stride-2 conv to a 28-wide
                                # output: 4, instead of its 4x4 upcast; 14x14, 10x10 and 6x6 images: 2, instead of scalar code; see
                                # benches/README.md, Design measurements)
DOT_TILE = (4,)                 # dot_tile: rows and columns (4 x 4 with 4 reduce lanes: 16 float4 accumulators, the expander's vector
                                # reduce on a vector_alu renderer; on x @ w.T it beats 8 x 4 and 8 x 8, whose 64 float4 accumulators
                                # spill, and an 8 x 8 tile of scalar accumulators with far more C: benches/README.md, Design measurements)
MAX_IMAGE_ROW = 16              # image_tile: the longest image row upcast fully
IMAGE_ROWS = (8, 4)             # and its output channels per tile (conv 16->32 on 8x8: benches/README.md, Design measurements)
MAX_UNPADDED_TAPS = 7           # the longest tap loop of an unpadded conv that _unpadded_tap_tile takes
MAX_TAPS, MAX_TAP_UNROLL = 4, 8  # tap_tile: the longest tap loop, the longest reduce loop unrolled (a conv's weight gradient)
TAP_ROWS = (8, 16)              # and the image rows upcast with the taps (the input gradient's per-tap products)
TAP_IN_CHANNELS = 2             # and the input channels of a weight gradient (see tap_tile)
UNROLL_MAX_LOADS = 32           # a reduce loop is unrolled when its trip count times the loads in its body is at most this
UPCAST_MAX_BODY_OPS = 100       # a kernel without reduces is upcast only when its body is at most this many operations (expanded_ops):
                                # the lanes are copies of the body that share only the vector accesses, so a long body (a threefry hash,
                                # ~130 operations) gains nothing from them and is 4 times the code
TILE_FAMILY_ROWS = (4, 16)      # the other row counts of a matmul tile a BEAM search starts from (candidates vs search time)
# and a 4 x 32 tile whose 4 UNROLL lanes accumulate as a chain of fused multiply-adds (Opt CHAIN; its tree of 4 products spills, the
# 8 x 16 tile chained is latency-bound); on one core it beats the 8 x 16 tile at 1024 (benches/README.md, Design measurements)
TILE_FAMILY_CHAINED = (4, 32)

# ***** codegen: the GPU heuristic (codegen/opt/heuristic.py hand_coded_gpu, tensor_core_opts) *****
GPU_GROUP_MAX_OUTPUTS = 2048    # a reduce kernel with at most this many outputs splits its reduce over a workgroup (GROUPTOP): too few
GPU_GROUP_MIN_REDUCE = 256      # outputs to fill the device otherwise; only for reduces of at least this many elements
GPU_GROUP = 16                  # threads that share one reduce at most (the largest count that divides it)
GPU_LOCAL_MAX = 128             # threads per workgroup the LOCAL splits aim for
GPU_LOCALS = (32, 16, 8, 4, 3, 2)  # the LOCAL sizes tried on each output range, largest first
TC_UPCASTS = (4, 2)             # after TC: the M and N blocks one warp computes (each of the instruction's output elements this many times)
TC_LOCALS = (4, 2)              # and the warps of a workgroup along N

# ***** the C renderer (renderer/cstyle.py) *****
# expressions nested deeper get a name even when used once: a chain of thousands of single-use ops would otherwise be one expression
# nested past the C compiler's limits, and every prefix of it a string of its own (memory quadratic in the chain)
MAX_INLINE_DEPTH = 64
# a CPU kernel's loop that streams through a big buffer prefetches it PREFETCH_BYTES ahead (renderer/cstyle.py ClangRenderer): the
# hardware prefetchers stop at each 4 KiB page, and where decoding each line takes long (a quantized weight) a core waits on memory
PREFETCH_BYTES = 2048           # distance ahead (further: lines evicted before use; nearer: they arrive late)
PREFETCH_MIN_BYTES = 1 << 20    # buffers smaller than this are left to the hardware (likely in cache: a prefetch is an instruction more)
PREFETCH_MAX_STRIDE = 512       # bytes a load's address moves per loop step at most (past it a prefetch 2 KiB ahead reads lines the
                                # loop skips)
