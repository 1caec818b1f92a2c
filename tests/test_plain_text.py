"""What a plain Python error names, read off its message and failing line alone (a pasted log has no frames):
the None operand of an operator, the names and the value of an unpacking, the module an attribute is missing
from. kbdebug.diagnoser.plain; the live values are tests/test_plain_live.py's."""

from __future__ import annotations

import pytest

from kbdebug.api import diagnose_text
from kbdebug.diagnoser.plain import plain_facts

NONE = "NoneType"


@pytest.mark.parametrize(
    ("message", "code", "expected"),
    [
        ("unsupported operand type(s) for /: 'NoneType' and 'int'", "acc = correct / total", {"attribute_of": "correct"}),
        ("unsupported operand type(s) for +=: 'NoneType' and 'Tensor'", "running_loss += loss", {"attribute_of": "running_loss"}),
        ("unsupported operand type(s) for *: 'float' and 'NoneType'", "lr = base_lr * scale(epoch)", {"attribute_of": "scale(epoch)"}),
        ("'<' not supported between instances of 'NoneType' and 'float'", "if best_loss < val_loss:", {"attribute_of": "best_loss"}),
        ("'<' not supported between instances of 'float' and 'NoneType'", "if val_loss < best:", {"attribute_of": "best"}),
        ("object of type 'NoneType' has no len()", "n = len(dataset.samples)", {"attribute_of": "dataset.samples"}),
        ("unsupported operand type(s) for -: 'NoneType' and 'int'", "x = a-1", {}),  # no operator with spaces: no operand named
    ],
)
def test_an_operator_given_none_names_the_operand_that_is_none(message: str, code: str, expected: dict[str, str]) -> None:
    assert plain_facts("TypeError", message, code) == {"attribute_of_type": NONE, **expected}


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("unsupported operand type(s) for +: 'int' and 'str'", "x = a + b"),  # no None: nothing to name
        ('can only concatenate str (not "int") to str', "name = prefix + i"),
        ("'<' not supported between instances of 'str' and 'int'", "if a < b:"),
    ],
)
def test_an_operator_given_other_types_names_nothing(message: str, code: str) -> None:
    assert plain_facts("TypeError", message, code) == {}


def test_an_unpacking_names_its_names_its_value_and_the_count() -> None:
    loop = plain_facts("ValueError", "too many values to unpack (expected 2)", "for images, labels in train_loader:  # batches")
    assert loop == {"unpack_expected": 2, "unpack_targets": "images, labels", "unpacked": "train_loader", "unpack_loop": True}
    assign = plain_facts("ValueError", "not enough values to unpack (expected 3, got 2)", "img, label, path = dataset[i]")
    assert assign == {
        "unpack_expected": 3,
        "unpack_got": 2,
        "unpack_targets": "img, label, path",
        "unpacked": "dataset[i]",
        "unpack_loop": False,
    }
    # which of two unpackings failed is not known: the count alone
    assert plain_facts("ValueError", "too many values to unpack (expected 2)", "for i, (x, y) in enumerate(loader):") == {
        "unpack_expected": 2
    }
    assert plain_facts("ValueError", "too many values to unpack (expected 2)", "outputs = model(x)") == {"unpack_expected": 2}
    assert plain_facts("ValueError", "could not convert string to float: 'cat'", "v = float(row[1])") == {}


def test_a_module_without_the_attribute_is_named_as_a_module() -> None:
    facts = plain_facts("AttributeError", "module 'torch' has no attribute 'compile'", "model = torch.compile(model)")
    assert facts == {"attribute_of_type": "module", "missing_attribute": "compile", "attribute_module": "torch", "attribute_of": "torch"}
    wrapped = plain_facts("AttributeError", "'DataParallel' object has no attribute 'backbone'", "feats = model.backbone(x)")
    assert wrapped == {"attribute_of_type": "DataParallel", "missing_attribute": "backbone", "attribute_of": "model"}


def _page(code: str, error: str) -> dict[str, str]:
    log = f'Traceback (most recent call last):\n  File "/home/u/train.py", line 30, in <module>\n    {code}\n{error}\n'
    inc = diagnose_text(log).incidents[0]
    assert inc.rule == "other"
    return {k: str(inc.guide.get(k, "")) for k in ("what", "why", "confirm", "fix")}


@pytest.mark.parametrize(
    ("code", "error", "section", "said"),
    [
        (
            "model.eval()",
            "AttributeError: 'collections.OrderedDict' object has no attribute 'eval'",
            "fix",
            'model.load_state_dict(torch.load(path, map_location="cpu"))',
        ),
        ("cfg = yaml.load(f)", "TypeError: load() missing 1 required positional argument: 'Loader'", "fix", "`yaml.safe_load(f)`"),
        ("pbar = tqdm(loader)", "TypeError: 'module' object is not callable", "fix", "`from tqdm import tqdm`"),
        ("x = x.to(device)", "AttributeError: 'list' object has no attribute 'to'", "fix", "`x = torch.stack(x)`"),
        ("out = model()", "TypeError: forward() missing 1 required positional argument: 'x'", "fix", "`model(*batch)`"),
        ("data = json.load(f)", "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)", "why", "an empty file"),
        (
            "img = Image.open(p)",
            "PIL.UnidentifiedImageError: cannot identify image file '/data/x/1.jpg'",
            "confirm",
            "`file /data/x/1.jpg`",
        ),
        ("torch.save(best, p)", "NameError: name 'best' is not defined", "confirm", '`grep -n "best" /home/u/train.py`'),
        ("x, y = next(iter(loader))", "StopIteration", "confirm", "`print(len(dataset), len(loader))`"),
        ("return self.f(x)", "RecursionError: maximum recursion depth exceeded", "fix", "`self.__dict__`"),
        ("v = float(row[1])", "ValueError: could not convert string to float: 'label'", "fix", "`next(reader)`"),
        ("n = int(parts[0])", "ValueError: invalid literal for int() with base 10: 'id'", "why", "header row"),
        ("f = open(p)", "OSError: [Errno 24] Too many open files: 'data/a.txt'", "fix", "`ulimit -n 65536`"),
        ("r = int(os.environ['LOCAL_RANK'])", "KeyError: 'LOCAL_RANK'", "fix", "`torchrun --nproc_per_node=1 /home/u/train.py`"),
        ("d = os.environ['DATA_ROOT']", "KeyError: 'DATA_ROOT'", "fix", "`export DATA_ROOT=...`"),
        (
            "b = tok(t, padding=True)",
            "ValueError: Asking to pad but the tokenizer does not have a padding token.",
            "fix",
            "`tokenizer.pad_token = tokenizer.eos_token`",
        ),
        (
            "loss.backward()",
            "RuntimeError: Expected to mark a variable ready only once. This error is caused by",
            "fix",
            "use_reentrant=False)`",
        ),
        ("scaler.unscale_(opt)", "ValueError: Attempting to unscale FP16 gradients.", "confirm", "`{torch.float16}`"),
        (
            "m = get_peft_model(m, c)",
            "ValueError: Target modules {'q_proj'} not found in the base model.",
            "fix",
            '`target_modules="all-linear"`',
        ),
        (
            "t = AutoTokenizer.from_pretrained(n)",
            "OSError: We couldn't connect to 'https://huggingface.co' to load the files",
            "fix",
            "`HF_HUB_OFFLINE=1`",
        ),
        (
            "for x, y in loader:",
            "TypeError: default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found <class 'PIL.Image.Image'>",
            "fix",
            "`transforms.ToTensor()`",
        ),
        ("a = TrainingArguments(bf16=True)", "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10", "fix", "`fp16=True`"),
        (
            "y = self.norm(x)",
            "ValueError: Expected more than 1 spatial element when training, got input size torch.Size([2, 8, 1, 1])",
            "why",
            "1x1",
        ),
        (
            "a, b = random_split(ds, [n1, n2])",
            "ValueError: Sum of input lengths does not equal the length of the input dataset!",
            "fix",
            "`random_split(dataset, [n_train, len(dataset) - n_train])`",
        ),
        ("opt.step()", "RuntimeError: Adam does not support sparse gradients, please consider SparseAdam instead", "fix", "`sparse=False`"),
        (
            "df = pd.read_csv(p)",
            "pandas.errors.ParserError: Error tokenizing data. C error: Expected 3 fields in line 17, saw 4",
            "confirm",
            "`sed -n '1p;17p'`",
        ),
        ("y = torch.tensor(labels)", "ValueError: too many dimensions 'str'", "fix", "classes.index(c)"),
        (
            "z = torch.zeros(3, dtype=d)",
            "TypeError: zeros(): argument 'dtype' must be torch.dtype, not str",
            "fix",
            '`getattr(torch, "float16")`',
        ),
        (
            "with torch.autocast(dev):",
            "RuntimeError: User specified an unsupported autocast device_type 'gpu'",
            "fix",
            "`torch.autocast(device.type)`",
        ),
        ("model = torch.compile(model)", "RuntimeError: Dynamo is not supported on Python 3.12+", "confirm", "sys.version_info"),
        (
            "y = layer(x, src_mask=m)",
            "RuntimeError: The shape of the 3D attn_mask is torch.Size([16, 50, 50]), but should be (128, 50, 50).",
            "fix",
            "`mask.repeat_interleave(num_heads, dim=0)`",
        ),
        (
            "best = scores.max()",
            "RuntimeError: max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim",
            "fix",
            "`m = x.max() if x.numel()",
        ),
        (
            "emb = nn.Embedding(n, 64, padding_idx=pad)",
            "AssertionError: Padding_idx must be within num_embeddings",
            "fix",
            "padding_idx=tokenizer.pad_token_id)`",
        ),
        (
            "net = UNet(3, dropout=0.1)",
            "TypeError: UNet.__init__() got an unexpected keyword argument 'dropout'",
            "confirm",
            "`import inspect; print(inspect.signature(UNet.__init__))`",
        ),
        (
            "auc = roc_auc_score(y, s)",
            "ValueError: Only one class present in y_true. ROC AUC score is not defined in that case.",
            "fix",
            "stratify=y",
        ),
        (
            "x1 += offset",
            "RuntimeError: Output 0 of UnbindBackward0 is a view and is being modified inplace. This view is the output of a "
            "function that returns multiple views.",
            "fix",
            "`a = a.clone()`",
        ),
        (
            "packed = pack_padded_sequence(emb, lengths, batch_first=True)",
            "RuntimeError: `lengths` array must be sorted in decreasing order when `enforce_sorted` is True.",
            "fix",
            "enforce_sorted=False)",
        ),
        (
            "x = torch.from_numpy(df['tokens'].values)",
            "TypeError: can't convert np.ndarray of type numpy.object_. The only supported types are: float64, float32",
            "fix",
            "pad_sequence",
        ),
        (
            "opt = torch.optim.Adam(model.parameters, lr=1e-3)",
            "TypeError: params argument given to the optimizer should be an iterable of Tensors or dicts, but got method",
            "fix",
            "torch.optim.Adam(model.parameters(), lr=...)",
        ),
        (
            "q, k, v = qkv.split([256, 256, 256], dim=-1)",
            "RuntimeError: split_with_sizes expects split_sizes to sum exactly to 1024 (input tensor's size at dimension 2), "
            "but got split_sizes=[256, 256, 256]",
            "what",
            "which hold 768 elements, and that dim has 1024",
        ),
        (
            "self.norm = nn.GroupNorm(32, ch)",
            "ValueError: num_channels (48) must be divisible by num_groups (32)",
            "fix",
            "nn.GroupNorm(math.gcd(32, 48), 48)",
        ),
        ("x = x.to('half')", "RuntimeError: Invalid device string: 'half'", "fix", "x.to(torch.float16)"),
        (
            "layer = nn.TransformerEncoderLayer(d_model=250, nhead=8)",
            "AssertionError: embed_dim must be divisible by num_heads",
            "confirm",
            "d_model % nhead",
        ),
        (
            "loader = DataLoader(ds, batch_size=32, shuffle=True, sampler=sampler)",
            "ValueError: sampler option is mutually exclusive with shuffle",
            "fix",
            "sampler.set_epoch(epoch)",
        ),
        (
            'dist.init_process_group("nccl")',
            "torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms while trying to connect to "
            "(10.0.0.1, 29500).",
            "confirm",
            "`nc -zv 10.0.0.1 29500`",
        ),
        (
            "x = img.permute(0, 3, 1, 2)",
            "RuntimeError: permute(sparse_coo): number of dimensions in the tensor input does not match the length of the "
            "desired ordering of dimensions i.e. input.dim() = 3 is not equal to len(dims) = 4",
            "fix",
            "`x.unsqueeze(0)`",
        ),
        (
            "z = torch.normal(mu, std)",
            "RuntimeError: normal expects all elements of std >= 0.0",
            "fix",
            "std = torch.exp(0.5 * logvar)",
        ),
        (
            "y.backward(torch.ones(4))",
            "RuntimeError: Mismatch in shape: grad_output[0] has a shape of torch.Size([4]) and output[0] has a shape of torch.Size([3]).",
            "what",
            "a gradient of shape `[4]`",
        ),
        (
            "model.fc.weight = torch.from_numpy(w)",
            "TypeError: cannot assign 'torch.FloatTensor' as parameter 'weight' (torch.nn.Parameter or None expected)",
            "fix",
            "layer.weight.copy_(tensor)",
        ),
        (
            "w[0] -= lr * g",
            "RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.",
            "why",
            "torch.no_grad()",
        ),
    ],
)
def test_a_plain_error_whose_wording_says_what_was_meant_gets_its_fix(code: str, error: str, section: str, said: str) -> None:
    assert said in _page(code, error)[section]


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("n = n.to(device)", "AttributeError: 'int' object has no attribute 'to'"),  # not a list: no stack
        ("v = cfg.lr", "AttributeError: 'dict' object has no attribute 'lr'"),  # a config dict, not a state dict
        ("data = json.load(f)", "json.decoder.JSONDecodeError: Expecting ',' delimiter: line 3 column 5 (char 20)"),  # JSON, broken
        ("y = f(g(x))", "TypeError: 'module' object is not callable"),  # two calls: which is the module is not known
        ("x = cfg_local['lr']", "KeyError: 'lr'"),  # a dict of the code's, not the environment
        ("v = math.sqrt(x)", "ValueError: math domain error"),  # not text read as a number
        ('g = clip(ps, 1.0, norm_type="fro")', "ValueError: could not convert string to float: 'fro'"),  # an argument, not a field
        ("f = open(p)", "OSError: [Errno 22] Invalid argument: 'a?.txt'"),  # not the file limit
        ("b = tok(t)", "ValueError: Asking for a padding token twice"),  # not transformers' wording
        ("x = x.to(dev)", "RuntimeError: Invalid device string: 'cuda0'"),  # a device's name misspelt, not a dtype
    ],
)
def test_a_lookalike_wording_gets_no_such_fix(code: str, error: str) -> None:
    page = " ".join(_page(code, error).values())
    wrongs = (
        "torch.stack",
        "load_state_dict",
        "an empty file",
        "from f import",
        "from g import",
        "torchrun",
        "export ",
        "header",
        "ulimit",
        "torch.float",
    )
    for wrong in (*wrongs, "eos_token"):
        assert wrong not in page


def test_a_none_sample_in_a_batch_keeps_its_own_page_not_the_collate_types() -> None:
    page = _page(
        "for x, y in loader:",
        "TypeError: default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found <class 'NoneType'>",
    )
    assert "returned None" in page["why"] and "ToTensor" not in " ".join(page.values())


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (
            "split_with_sizes expects split_sizes to sum exactly to 6 (input tensor's size at dimension 1), but got split_sizes=[2, 3]",
            "which hold 5 elements, and that dim has 6",
        ),
        ("embed_dim must be divisible by num_heads", "its number of heads does not divide"),
        ("selected index k out of range", "larger than that dim's size"),
    ],
)
def test_a_message_pasted_without_its_type_gets_its_page(message: str, said: str) -> None:
    from kbdebug.api import diagnose_text

    inc = diagnose_text(message + "\n").root
    assert inc is not None and inc.rule == "other"
    assert said in inc.guide["what"].replace("\n", " ")
    assert "``" not in inc.guide["what"]


def test_messages_pasted_without_their_type_say_which_and_differ_in_signature() -> None:
    """Two bare messages once shared the signature `other | ` and the notes `:`: a service grouped them as one crash."""
    from kbdebug.api import diagnose_text

    split = "split_with_sizes expects split_sizes to sum exactly to 6 (input tensor's size at dimension 1), but got split_sizes=[2, 3]"
    heads = "embed_dim must be divisible by num_heads"
    a, b = (diagnose_text(m + "\n").root for m in (split, heads))
    assert a is not None and b is not None
    assert a.facts["notes"] == split and b.facts["notes"] == heads
    assert a.signature != b.signature and "split_with_sizes expects" in a.signature_key


def test_an_exception_without_a_message_has_notes_without_a_dangling_colon() -> None:
    from kbdebug.api import diagnose_text

    log = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    batch = next(it)\nStopIteration\n'
    inc = diagnose_text(log).root
    assert inc is not None and inc.rule == "other" and inc.facts["notes"] == "StopIteration"
