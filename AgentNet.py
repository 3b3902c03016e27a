"""Networks: building blocks, Q-networks (discrete actions), actors and critics (continuous ones).

Each takes net_dim (an int or a NetShape), state_dim and action_dim. States (batch, state_dim) pass
through `state_norm` first; continuous actions lie in [-1, 1]; a tuple state_dim is an image shape.
"""
import math

import torch
import torch.nn as nn


# ---- building blocks ----
def layer_init_orthogonal(layer: nn.Linear, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights keep activations well scaled at depth (Saxe et al. arXiv:1312.6120);
    a small `std` on an output layer starts the policy or Q-values near zero."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


class NoisyLinear(nn.Linear):
    """Linear layer with learned, factorised Gaussian weight noise that drives exploration (Fortunato et al.
    arXiv:1706.10295, section 3.2): W = W_mu + W_sigma * f(e_out) f(e_in)^T, f(x) = sign(x) sqrt(|x|), e ~ N(0, I),
    drawn afresh at each training forward; eval mode uses the mean weights."""

    def __init__(self, in_features: int, out_features: int, sigma_0: float = 0.5):
        super().__init__(in_features, out_features)  # weight and bias are the means W_mu, b_mu
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma_0 * bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma_0 * bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return super().forward(x)
        noise = torch.randn(self.in_features + self.out_features, device=self.weight.device)
        noise_in, noise_out = (noise.sign() * noise.abs().sqrt()).split((self.in_features, self.out_features))
        weight = torch.addcmul(self.weight, self.weight_sigma, torch.outer(noise_out, noise_in))  # (out, in)
        return nn.functional.linear(x, weight, torch.addcmul(self.bias, self.bias_sigma, noise_out))


class NetShape:
    """An agent's hidden widths (input side first, e.g. TD3's (400, 300)), activation, RNN cell."""

    activations = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "gelu": nn.GELU}
    cells = {"lstm": nn.LSTMCell, "gru": nn.GRUCell}
    memory_rows = {"lstm": 2, "gru": 1}  # a cell's memory: an LSTM's h and c, a GRU's h

    def __init__(self, widths: tuple[int, ...], activation: str = "relu", cell: str = "lstm"):
        self.widths, self.activation, self.cell = tuple(widths), activation, cell

    def __repr__(self) -> str:
        return f"NetShape({self.widths}, {self.activation!r}, {self.cell!r})"


def net_shape(net_dim: "int | NetShape") -> NetShape:
    """net_dim as a NetShape; an int n is NetShape((n, n))."""
    return net_dim if isinstance(net_dim, NetShape) else NetShape((net_dim, net_dim))


def build_mlp(dims: list[int], output_std: float = 1.0, activation: str = "relu", later_layer: type | None = None
              ) -> nn.Sequential:
    """Linear-activation-...-Linear; later_layer(dim_in, dim_out): the layers after the first (Rainbow's noisy ones)."""
    layers = []
    for i, (dim_in, dim_out) in enumerate(zip(dims[:-1], dims[1:])):
        std = output_std if i == len(dims) - 2 else math.sqrt(2)
        layers += [later_layer(dim_in, dim_out) if later_layer and i > 0 else
                   layer_init_orthogonal(nn.Linear(dim_in, dim_out), std=std), NetShape.activations[activation]()]
    return nn.Sequential(*layers[:-1])


def mlp(net_dim: "int | NetShape", dim_in: int, dim_out: int | None, output_std: float = 1.0,
        later_layer: type | None = None) -> nn.Sequential:
    """MLP of net_dim's widths; dim_out None: a trunk that ends with the activation."""
    shape = net_shape(net_dim)
    if dim_out is None:
        return nn.Sequential(build_mlp([dim_in, *shape.widths], activation=shape.activation, later_layer=later_layer),
                             NetShape.activations[shape.activation]())
    return build_mlp([dim_in, *shape.widths, dim_out], output_std, shape.activation, later_layer)


# ---- image encoders (pixels) ----
def is_image(state_dim: "int | tuple[int, ...]") -> bool:
    """Whether a state_dim is an image's shape (a tuple) rather than a flat state's length."""
    return isinstance(state_dim, (tuple, list))


class ImageEncoder(nn.Module):
    """Images -> features (..., width), scaled here so buffers keep frames in their own dtype."""

    # Per (H, W): each conv's (out_channels, kernel, stride), the Linear's width, the value scale.
    # Nature DQN (Mnih et al. 2015, Methods) for Atari 84x84 and CarRacing 96x96 (SB3's NatureCNN);
    # MinAtar's 10x10 bool grids (no scaling): Young & Tian arXiv:1903.03176, section 4.
    nature_dqn = dict(convs=((32, 8, 4), (64, 4, 2), (64, 3, 1)), width=512, scale=1 / 255)
    specs = {(84, 84): nature_dqn, (96, 96): nature_dqn, (10, 10): dict(convs=((16, 3, 1),), width=128, scale=1.0)}

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.shape = tuple(shape)
        self.channels_last, size, channels = self.layout(self.shape)
        spec = self.specs[size]
        self.scale, self.width = spec["scale"], spec["width"]
        layers, side = [], size[0]
        for out_channels, kernel, stride in spec["convs"]:
            layers += [layer_init_orthogonal(nn.Conv2d(channels, out_channels, kernel, stride)), nn.ReLU()]
            channels, side = out_channels, (side - kernel) // stride + 1
        self.convs = nn.Sequential(*layers, nn.Flatten())
        self.fc = nn.Sequential(layer_init_orthogonal(nn.Linear(channels * side * side, self.width)), nn.ReLU())

    @classmethod
    def layout(cls, shape: tuple[int, ...]) -> tuple[bool, tuple[int, int], int]:
        """(channels_last, (H, W), channels); square frames tell (H, W, C) from (C, H, W)."""
        if len(shape) == 3 and shape[0] == shape[1] and (shape[0], shape[1]) in cls.specs:
            return True, (shape[0], shape[1]), shape[2]
        if len(shape) == 3 and shape[1] == shape[2] and (shape[1], shape[2]) in cls.specs:
            return False, (shape[1], shape[2]), shape[0]
        sizes = ", ".join(f"{h}x{w}" for h, w in cls.specs)
        raise ValueError(f"an image of shape {tuple(shape)} is not accepted: the image encoders take (H, W, C) or "
                         f"(C, H, W) images of {sizes} pixels (Atari's 84x84 frame stacks, CarRacing's 96x96x3, "
                         f"MinAtar's 10x10xC), or flat states (state_dim,)")

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        lead = image.shape[:image.dim() - 3]  # () for one image, (batch,), or (T, N) of a rollout
        x = image.reshape(-1, *self.shape).float() * self.scale  # (B, *shape) in [0, 1]
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)  # (B, C, H, W)
        return self.fc(self.convs(x)).reshape(*lead, self.width)  # (..., width)


def state_mlp(net_dim: "int | NetShape", state_dim: "int | tuple[int, ...]", dim_out: int | None,
              output_std: float = 1.0, if_noisy: bool = False) -> nn.Sequential:
    """mlp of the networks that take images (an ImageEncoder, then one output layer, as the papers' networks) and
    noisy layers (NoisyLinear, Rainbow)."""
    if not is_image(state_dim):
        return mlp(net_dim, state_dim, dim_out, output_std, NoisyLinear if if_noisy else None)
    encoder = ImageEncoder(state_dim)
    if dim_out is None:
        return nn.Sequential(encoder)
    return nn.Sequential(encoder, NoisyLinear(encoder.width, dim_out) if if_noisy else
                         layer_init_orthogonal(nn.Linear(encoder.width, dim_out), std=output_std))


def trunk_width(net_dim: "int | NetShape", dim_in: "int | tuple[int, ...]") -> int:
    """Width of state_mlp(net_dim, dim_in, None)'s features."""
    if is_image(dim_in):
        return ImageEncoder.specs[ImageEncoder.layout(dim_in)[1]]["width"]
    return net_shape(net_dim).widths[-1]


class StateNorm(nn.Module):
    """(state - mean) / std, clipped, from running statistics of every state explored. Kept as
    buffers, so every copy (actor.pt, explorers) acts on the inputs it learned from."""

    clip = 10.0  # as Stable-Baselines3's VecNormalize: a rare state cannot swamp the first layer

    def __init__(self, state_dim: int):
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))  # states merged so far
        self.register_buffer("mean", torch.zeros(state_dim))  # (state_dim,)
        self.register_buffer("std", torch.ones(state_dim))  # (state_dim,), sqrt(variance + eps), > 0

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return ((state - self.mean) / self.std).clamp(-self.clip, self.clip)

    @torch.no_grad()
    def update(self, count: torch.Tensor, total: torch.Tensor, total_square: torch.Tensor, eps: float = 1e-8):
        """Merge `count` states' sums and sums of squares (Chan, Golub and LeVeque, 1979)."""
        new_count, batch_mean = self.count + count, total / count
        delta = batch_mean - self.mean.double()
        old_square = (self.std.double().square() - eps) * self.count  # sums of squared deviations
        batch_square = total_square - count * batch_mean.square()
        square = old_square + batch_square + delta.square() * self.count * count / new_count
        self.mean.copy_(self.mean.double() + delta * count / new_count)
        self.std.copy_((square / new_count).clamp(min=0.0).add(eps).sqrt())
        self.count.copy_(new_count)


# ---- Q-networks (discrete actions) ----
ILLEGAL = -1e8  # below any real Q-value or logit, yet finite, so that 0 * ILLEGAL stays 0


def legal_only(values: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """values (..., action_dim) with illegal actions' at ILLEGAL: never an argmax, probability 0
    in a softmax (as MaskablePPO). The mask is the state's last action_dim entries, 1 legal."""
    return values.masked_fill(state[..., -values.shape[-1]:] < 0.5, ILLEGAL)


class Greedy(nn.Module):
    """A Q-network's greedy policy as one exportable module: states -> argmax actions (batch,)
    (or (batch, agents) for a team); if_action_mask: the best legal one."""

    def __init__(self, q_net: nn.Module, if_action_mask: bool = False):
        super().__init__()
        self.q_net, self.if_action_mask = q_net, if_action_mask

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        q = self.q_net(state)
        return (legal_only(q, state) if self.if_action_mask else q).argmax(dim=-1)


class QNet(nn.Module):
    """Q(s, .), (batch, action_dim * num_atoms); if_noisy: NoisyLinear after the first layer."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, if_noisy: bool = False, num_atoms: int = 1):
        super().__init__()
        self.state_norm = nn.Identity()
        self.net = state_mlp(net_dim, state_dim, action_dim * num_atoms, output_std=0.1, if_noisy=if_noisy)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.state_norm(state))  # (batch, action_dim * num_atoms)


class QNetDuel(QNet):
    """Dueling heads, Q = V + A - mean_a' A (Wang et al. arXiv:1511.06581, eq. 9), per atom."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, if_noisy: bool = False, num_atoms: int = 1):
        nn.Module.__init__(self)
        self.state_norm = nn.Identity()
        self.net, width = state_mlp(net_dim, state_dim, None, if_noisy=if_noisy), trunk_width(net_dim, state_dim)
        self.value, self.advantage = (NoisyLinear(width, dim) if if_noisy else
                                      layer_init_orthogonal(nn.Linear(width, dim), std=0.1)
                                      for dim in (num_atoms, action_dim * num_atoms))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        hidden = self.net(self.state_norm(state))  # (batch, net_dim)
        value = self.value(hidden).unsqueeze(-2)  # (batch, 1, num_atoms)
        advantage = self.advantage(hidden).unflatten(-1, (-1, value.shape[-1]))  # (batch, action_dim, num_atoms)
        return (value + advantage - advantage.mean(dim=-2, keepdim=True)).flatten(-2)  # (batch, action_dim * num_atoms)


class QNetDist(QNet):
    """C51 (Bellemare et al. arXiv:1707.06887): distributions on `support`; forward: their means."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, if_noisy: bool = False, num_atoms: int = 51,
                 v_min: float = -10.0, v_max: float = 10.0):
        if num_atoms < 2 or not v_min < v_max:
            raise ValueError(f"num_atoms={num_atoms}, v_min={v_min}, v_max={v_max} are not accepted: a categorical "
                             f"distribution needs num_atoms >= 2 and v_min < v_max")
        super().__init__(net_dim, state_dim, action_dim, if_noisy, num_atoms)
        self.register_buffer("support", torch.linspace(v_min, v_max, num_atoms))  # (num_atoms,)

    def get_log_probs(self, state: torch.Tensor) -> torch.Tensor:
        """log p(z_i | s, a), (batch, action_dim, num_atoms)."""
        return super().forward(state).unflatten(-1, (-1, self.support.shape[0])).log_softmax(dim=-1)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return (self.get_log_probs(state).exp() * self.support).sum(dim=-1)  # (batch, action_dim)


class QNetDistDuel(QNetDist, QNetDuel):
    """C51 from dueling streams: atom logits V + A - mean_a A (Rainbow, arXiv:1710.02298)."""


class QNetTwin(nn.Module):
    """Two Q(s, .) networks for clipped double Q-learning with discrete actions (discrete SAC)."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int):
        super().__init__()
        self.q1, self.q2 = (QNet(net_dim, state_dim, action_dim) for _ in range(2))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.q1(state)  # (batch, action_dim)

    def get_q_values(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both networks' Q(s, .), (batch, action_dim) each."""
        return self.q1(state), self.q2(state)

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Both Q estimates of the actions taken (batch, 1), (batch,) each."""
        return tuple(q.gather(-1, action).squeeze(-1) for q in self.get_q_values(state))


# ---- actors (continuous actions) ----
class Actor(nn.Module):
    """Deterministic policy a = tanh(mlp(s)) for DDPG and TD3."""

    trunk = staticmethod(mlp)  # state_mlp where the states may be images (ActorEncoded)

    def __init__(self, net_dim: int, state_dim: int, action_dim: int):
        super().__init__()
        self.state_norm = nn.Identity()
        self.net = self.trunk(net_dim, state_dim, action_dim, output_std=0.1)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.state_norm(state)).tanh()  # (batch, action_dim), in [-1, 1]

    def get_action(self, state: torch.Tensor, noise_std: float, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Exploration: action + noise_std * noise (N(0, 1); drawn where None), clipped."""
        action = self(state)
        noise = torch.randn_like(action) if noise is None else noise
        return (action + noise * noise_std).clamp(-1.0, 1.0)


class ActorSAC(nn.Module):
    """Tanh-squashed Gaussian policy: a = tanh(u), u ~ N(mean(s), std(s)), its mean and log std bounded: unbounded,
    log pi and the soft targets ran away (History/UPDATE_LOG.md, 2026-11-28; tests/test_sac_bounds.py)."""

    log_std_min, log_std_max = -5.0, 2.0  # Yarats' pytorch_sac bounds: the density of a sample stays resolvable
    mean_max = 5.0  # |pre-tanh mean| soft bound: tanh(5) = 0.99991, and log(1 - tanh(u)^2) stays above -9 per dimension

    trunk = staticmethod(mlp)  # state_mlp where the states may be images (ActorSACEncoded)

    def __init__(self, net_dim: int, state_dim: int, action_dim: int):
        super().__init__()
        self.state_norm = nn.Identity()
        self.net = self.trunk(net_dim, state_dim, action_dim * 2, output_std=0.1)

    def get_mean_log_std(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.net(self.state_norm(state)).chunk(2, dim=-1)  # (batch, action_dim) each
        return self.mean_max * (mean / self.mean_max).tanh(), log_std.clamp(self.log_std_min, self.log_std_max)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """The deterministic action used for evaluation: tanh of the mean."""
        return self.get_mean_log_std(state)[0].tanh()

    def get_action(self, state: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """A sample tanh(mean + std * noise), noise N(0, 1) (drawn where None)."""
        mean, log_std = self.get_mean_log_std(state)
        noise = torch.randn_like(mean) if noise is None else noise
        return (mean + log_std.exp() * noise).tanh()

    def get_action_log_prob(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised sample and its log pi(a|s), shapes (batch, action_dim) and (batch,)."""
        mean, log_std = self.get_mean_log_std(state)
        noise = torch.randn_like(mean)
        u = mean + log_std.exp() * noise
        log_prob_u = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(dim=-1)
        # tanh squashing correction: SAC paper (arXiv:1801.01290) appendix C, eq. 21,
        # log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)), the form that stays finite for large |u|
        log_det = 2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))
        return u.tanh(), log_prob_u - log_det.sum(dim=-1)


# ---- critics (continuous actions) ----
class Critic(nn.Module):
    """Q(s, a) for a continuous action."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int):
        super().__init__()
        self.state_norm = nn.Identity()
        self.net = mlp(net_dim, state_dim + action_dim, 1)

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat((self.state_norm(state), action), dim=1)).squeeze(1)  # (batch,)

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """All Q estimates this network holds: one here, two in CriticTwin."""
        return (self(state, action),)


class CriticTwin(nn.Module):
    """Two Q(s, a) networks for clipped double Q-learning (TD3, SAC); the actor follows q1."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int):
        super().__init__()
        self.q1, self.q2 = (Critic(net_dim, state_dim, action_dim) for _ in range(2))

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.q1(state, action)  # (batch,)

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.q1(state, action), self.q2(state, action)


class CriticQuantiles(nn.Module):
    """TQC's critics (Kuznetsov et al. arXiv:2005.04269, section 4.1): num_quantiles atoms
    of Q(s, a) per network; the actor maximises their mean (section 4)."""

    num_critics, num_quantiles = 2, 25  # sb3-contrib's, as rl-baselines3-zoo trains TQC

    def __init__(self, net_dim: int, state_dim: int, action_dim: int):
        super().__init__()
        self.state_norm = nn.Identity()
        self.nets = nn.ModuleList(mlp(net_dim, state_dim + action_dim, self.num_quantiles)
                                  for _ in range(self.num_critics))

    def get_quantiles(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        state_action = torch.cat((self.state_norm(state), action), dim=1)
        return torch.stack([net(state_action) for net in self.nets], dim=1)  # (batch, num_critics, num_quantiles)

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.get_quantiles(state, action).mean(dim=(1, 2))  # (batch,)

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (self(state, action),)


class CriticEncoded(nn.Module):
    """Q(s, a) with a state encoder shaped as the actors' first layer, so that AgentInterAC can
    give it the actor's encoder: one state encoding serves both networks."""

    def __init__(self, net_dim: int, state_dim: "int | tuple[int, ...]", action_dim: int):
        super().__init__()
        self.state_norm = nn.Identity()
        shape = net_shape(net_dim)
        widths, activation = shape.widths, shape.activation
        if is_image(state_dim):  # keyed and initialised as the actors' mlp
            self.encoder = nn.Sequential(ImageEncoder(state_dim))
            features = self.encoder[0].width
        else:  # as the first two modules of the actors' net
            self.encoder = nn.Sequential(layer_init_orthogonal(nn.Linear(state_dim, widths[0])),
                                         NetShape.activations[activation]())
            features = widths[0]
        self.net = mlp(NetShape(widths[1:] or widths, activation), features + action_dim, None)
        self.q1 = layer_init_orthogonal(nn.Linear(widths[-1], 1), std=0.1)

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.get_q_heads(state, action)[0]  # (batch,)

    def features(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return torch.cat((self.encoder(self.state_norm(state)), action), dim=1)  # the trunks' input

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (self.q1(self.net(self.features(state, action))).squeeze(1),)


class ActorEncoded(Actor):
    """AgentInterAC's actor: its first layer, on images its ImageEncoder, is the encoder the critic shares."""

    trunk = staticmethod(state_mlp)


class ActorSACEncoded(ActorSAC):
    """AgentInterSAC's actor: its first layer, on images its ImageEncoder, is the encoder the critic shares."""

    trunk = staticmethod(state_mlp)


class CriticTwinEncoded(CriticEncoded):
    """AgentInterSAC's critic: two Q networks, each its own trunk and head, over the one shared encoder. The 2020
    library's two heads on one trunk erred together and diverged on Ant-v5, as ModSAC's (History/UPDATE_LOG.md)."""

    def __init__(self, net_dim: int, state_dim: "int | tuple[int, ...]", action_dim: int):
        super().__init__(net_dim, state_dim, action_dim)
        twin = CriticEncoded(net_dim, state_dim, action_dim)  # a trunk and head initialised apart; its encoder unused
        self.net2, self.q2 = twin.net, twin.q1

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        features = self.features(state, action)
        return self.q1(self.net(features)).squeeze(1), self.q2(self.net2(features)).squeeze(1)


# ---- on-policy actors and critic (PPO, A2C) ----
class ActorPPO(nn.Module):
    """Gaussian policy u ~ N(mean(s), std), log std learned and state-independent; the agent keeps the raw u (exact
    log-prob), the env u clipped to [-1, 1]. Not torch.distributions, for speed (History/UPDATE_LOG.md, 2026-11-22)."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int):
        super().__init__()
        self.state_norm = nn.Identity()
        self.net = state_mlp(net_dim, state_dim, action_dim, output_std=0.01)
        self.log_std = nn.Parameter(torch.full((action_dim,), -0.5))  # std 0.6 at the start

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """The deterministic action used for evaluation: the mean, clipped into [-1, 1]."""
        return self.net(self.state_norm(state)).clamp(-1.0, 1.0)

    def get_action_log_prob(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A sampled action (batch, action_dim) and its log-prob (batch,)."""
        mean = self.net(self.state_norm(state))
        noise = torch.randn_like(mean)
        return mean + self.log_std.exp() * noise, self.gaussian_log_prob(noise)

    def get_log_prob_entropy(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi(action|state) and the policy's entropy, (batch,) each."""
        # the standard normal sample behind the action
        noise = (action - self.net(self.state_norm(state))) * (-self.log_std).exp()
        entropy = (self.log_std + 0.5 * math.log(2 * math.pi * math.e)).sum().expand(noise.shape[:-1])
        return self.gaussian_log_prob(noise), entropy

    def get_kl(self, state: torch.Tensor, old: "ActorPPO") -> torch.Tensor:
        """KL(old(.|s) || self(.|s)) of two diagonal Gaussians, (batch,)."""
        mean, old_mean = self.net(self.state_norm(state)), old.net(old.state_norm(state))
        variance_ratio = (2 * (old.log_std - self.log_std)).exp()  # std_old^2 / std^2, (action_dim,)
        return (self.log_std - old.log_std + 0.5 * variance_ratio - 0.5
                + 0.5 * (old_mean - mean).pow(2) * (-2 * self.log_std).exp()).sum(dim=-1)

    def gaussian_log_prob(self, noise: torch.Tensor) -> torch.Tensor:
        """log N(mean + std * noise; mean, std), summed over the independent action dimensions."""
        return (-0.5 * noise.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(dim=-1)

    @staticmethod
    def convert_action_for_env(action: torch.Tensor) -> torch.Tensor:
        return action.clamp(-1.0, 1.0)


class ActorDiscretePPO(nn.Module):
    """Categorical policy (also discrete SAC's); if_action_mask: legal actions only (legal_only)."""

    if_action_mask = False

    def __init__(self, net_dim: int, state_dim: int, action_dim: int):
        super().__init__()
        self.state_norm = nn.Identity()
        self.net = state_mlp(net_dim, state_dim, action_dim, output_std=0.01)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """The most likely action, (batch,)."""
        return self.get_logits(state).argmax(dim=-1)

    def get_logits(self, state: torch.Tensor) -> torch.Tensor:
        """The unnormalised log-probabilities of every action, (batch, action_dim)."""
        logits = self.net(self.state_norm(state))
        return legal_only(logits, state) if self.if_action_mask else logits

    def get_log_probs(self, state: torch.Tensor) -> torch.Tensor:
        """log pi(a|s) of every action, (batch, action_dim)."""
        return self.get_logits(state).log_softmax(dim=-1)

    def get_action_log_prob(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A sampled action (batch,) and its log-prob (batch,)."""
        log_probs = self.get_log_probs(state)
        # Gumbel-max trick: argmax(log pi - log E), E ~ Exp(1), is an exact sample of pi (any shape)
        action = (log_probs - torch.empty_like(log_probs).exponential_().log()).argmax(dim=-1)
        return action, log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1)

    def get_log_prob_entropy(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi(action|state) and the policy's entropy -sum_a pi(a) log pi(a), (batch,) each."""
        log_probs = self.get_log_probs(state)
        return log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1), -(log_probs.exp() * log_probs).sum(dim=-1)

    def get_kl(self, state: torch.Tensor, old: "ActorDiscretePPO") -> torch.Tensor:
        """KL(old(.|s) || self(.|s)) = sum_a pi_old(a) (log pi_old(a) - log pi(a)), (batch,)."""
        old_log_probs = old.get_log_probs(state)
        return (old_log_probs.exp() * (old_log_probs - self.get_log_probs(state))).sum(dim=-1)

    @staticmethod
    def convert_action_for_env(action: torch.Tensor) -> torch.Tensor:
        return action


class CriticValue(nn.Module):
    """State value V(s), the baseline of the advantage."""

    def __init__(self, net_dim: int, state_dim: int, _action_dim: int = 0):
        super().__init__()
        self.state_norm = nn.Identity()
        self.net = state_mlp(net_dim, state_dim, 1)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.state_norm(state)).squeeze(-1)  # (batch,)


class RecurrentCore(nn.Module):
    """An MLP encoder and a recurrent cell (LSTM or GRU): states (T, N, state_dim) -> features
    (T, N, width). Memory (rows, N, width) is zeroed at episode starts: a sequence never reads
    another episode's (as SB3's RecurrentPPO; R2D2, arXiv:1810.06059, stores it per sequence)."""

    def __init__(self, net_dim: "int | NetShape", state_dim: int):
        super().__init__()
        self.width = trunk_width(net_dim, state_dim)
        self.encoder = state_mlp(net_dim, state_dim, None)
        cell = net_shape(net_dim).cell
        self.cell, self.rows = NetShape.cells[cell](self.width, self.width), NetShape.memory_rows[cell]

    def zero_memory(self, num_envs: int, device) -> torch.Tensor:
        return torch.zeros((self.rows, num_envs, self.width), device=device)  # (rows, N, width)

    def forward(self, state: torch.Tensor, memory: torch.Tensor, episode_start: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """state (T, N, state_dim), memory, episode_start (T, N) -> features (T, N, width) and
        memories (T + 1, rows, N, width), [t] the one step t received. Acting: T = 1."""
        x = self.encoder(state)  # (T, N, width)
        if self.rows == 1 and state.shape[0] > 1:
            features = self.gru_spans(x, memory[0], episode_start)  # (T, N, width): a GRU's memory is its output
            return features, torch.cat((memory[None], features[:, None]))
        memories, features = [memory], []
        for t in range(state.shape[0]):
            kept = memory * (1 - episode_start[t].float()).view(1, -1, 1)  # a new episode starts from zeros
            memory = torch.stack(self.cell(x[t], tuple(kept))) if self.rows == 2 else self.cell(x[t], kept[0])[None]
            memories.append(memory)
            features.append(memory[0])
        return torch.stack(features), torch.stack(memories)

    def gru_spans(self, x: torch.Tensor, h: torch.Tensor, episode_start: torch.Tensor) -> torch.Tensor:
        """forward's GRU steps in one torch.gru call over the spans between episode starts:
        per-op cost dominates a small cell's step (History/UPDATE_LOG.md, 2026-11-27)."""
        num_steps, num_envs = episode_start.shape
        new = episode_start.T.bool().clone()  # (N, T): each copy's steps in order
        new[:, 0] = True  # a copy's first step begins a span: from h, or from zeros where it starts an episode
        span = new.flatten().cumsum(0) - 1  # (N * T,) the row of each step
        steps = torch.arange(num_steps, device=x.device).expand(num_envs, num_steps)
        pos = (steps - torch.cummax(steps * new, dim=1).values).flatten()  # (N * T,) the step's place in its span
        last_span, last_pos = torch.stack((span[-1], pos.max())).tolist()  # the sizes: one read from the device
        num_spans, length = last_span + 1, last_pos + 1
        padded = x.new_zeros((length, num_spans, self.width)).index_put((pos, span), x.transpose(0, 1).flatten(0, 1))
        first = span.view(num_envs, num_steps)[:, 0]  # (N,) each copy's first span
        kept = h * (1 - episode_start[0].float())[:, None]  # a copy whose first step starts an episode: zeros
        h0 = x.new_zeros((1, num_spans, self.width)).index_put((torch.zeros_like(first), first), kept)
        cell = self.cell
        # after the weights: has_biases, num_layers, dropout, train, bidirectional, batch_first
        out = torch.gru(padded, h0, (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh), True, 1, 0.0,
                        self.training, False, False)[0]  # (length, spans, width)
        return out[pos, span].view(num_envs, num_steps, self.width).transpose(0, 1)


class Recurrent:
    """Mixin that makes an on-policy network recurrent: a RecurrentCore (`core`) in front, the
    head one Linear on core(...)[0]. List it first: class ActorRecurrentPPO(Recurrent, ActorPPO)."""

    def __init__(self, net_dim: "int | NetShape", state_dim: int, action_dim: int = 0):
        super().__init__(NetShape(()), trunk_width(net_dim, state_dim), action_dim)
        self.core = RecurrentCore(net_dim, state_dim)


class ActorRecurrentPPO(Recurrent, ActorPPO):
    """ActorPPO's Gaussian on a recurrent core's features (Recurrent)."""


class ActorDiscreteRecurrentPPO(Recurrent, ActorDiscretePPO):
    """ActorDiscretePPO's categorical policy on a recurrent core's features (Recurrent)."""


class CriticRecurrentValue(Recurrent, CriticValue):
    """CriticValue on a recurrent core's features (Recurrent)."""


class QNetRecurrentDuel(QNetDuel):
    """R2D2's Q-network (Kapturowski et al., ICLR 2019, section 2.3): a RecurrentCore before
    QNetDuel's heads, whose streams keep a hidden layer on the cell's output as in the paper."""

    def __init__(self, net_dim: "int | NetShape", state_dim: "int | tuple[int, ...]", action_dim: int):
        width = trunk_width(net_dim, state_dim)  # the core's: an image encoder's on frames
        super().__init__(NetShape((width,), net_shape(net_dim).activation), width, action_dim)
        self.core = RecurrentCore(net_dim, state_dim)


# ---- multi-agent networks (a team's states: every agent's observation side by side) ----
def with_agent_ids(state: torch.Tensor, num_agents: int) -> torch.Tensor:
    """(..., num_agents * obs_dim) -> (..., num_agents, obs_dim + num_agents): each agent's
    one-hot id appended, so a shared network tells agents apart (as QMIX and MAPPO)."""
    obs = state.unflatten(-1, (num_agents, -1))  # (..., num_agents, obs_dim)
    ids = torch.eye(num_agents, dtype=obs.dtype, device=obs.device).expand(*obs.shape[:-1], num_agents)
    return torch.cat((obs, ids), dim=-1)


class MonotonicMixer(nn.Module):
    """QMIX's mixer (Rashid et al. arXiv:1803.11485, section 4.1): non-negative hypernetwork weights
    keep Q_tot monotonic in every q (eq. 5), so each agent's argmax is the team's. The hypernetworks
    take tanh(state): unbounded states made Q_tot diverge (History/UPDATE_LOG.md, 2026-11-25)."""

    def __init__(self, team_state_dim: int, num_agents: int, mix_dim: int = 32):
        super().__init__()
        self.hyper_w1 = nn.Linear(team_state_dim, num_agents * mix_dim)
        self.hyper_b1 = nn.Linear(team_state_dim, mix_dim)
        self.hyper_w2 = nn.Linear(team_state_dim, mix_dim)
        self.value = build_mlp([team_state_dim, mix_dim, 1])

    def forward(self, agent_q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Agents' q (B, num_agents), state (B, team_state_dim) -> Q_tot (B,)."""
        state = torch.tanh(state)
        w1 = self.hyper_w1(state).abs().unflatten(-1, (agent_q.shape[-1], -1))  # (B, num_agents, mix_dim)
        hidden = nn.functional.elu(torch.einsum("bn,bnm->bm", agent_q, w1) + self.hyper_b1(state))  # (B, mix_dim)
        return (hidden * self.hyper_w2(state).abs()).sum(dim=-1) + self.value(state).squeeze(-1)


class SumMixer(nn.Module):
    """VDN's mixing (Sunehag et al. arXiv:1706.05296, eq. 1): Q_tot is the sum of the agents' q."""

    def __init__(self, team_state_dim: int, num_agents: int):
        super().__init__()

    def forward(self, agent_q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return agent_q.sum(dim=-1)  # (B,)


class QMixNet(nn.Module):
    """A team's shared agent network q_i = Q(o_i, id_i, .), its chosen q_i mixed (mixer_class)
    into Q_tot(s, a). Feed-forward, unlike the papers': particle tasks' observations suffice."""

    mixer_class = MonotonicMixer

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int, if_noisy: bool = False):
        super().__init__()
        self.num_agents = num_agents
        self.agent_net = QNet(net_dim, state_dim + num_agents, action_dim, if_noisy)
        self.mixer = self.mixer_class(num_agents * state_dim, num_agents)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """(..., num_agents * state_dim) -> q-values (..., num_agents, action_dim)."""
        return self.agent_net(with_agent_ids(state, self.num_agents))

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Q_tot of the joint action taken, action (B, num_agents) integers -> (Q_tot (B,),)."""
        agent_q = self(state).gather(-1, action.unsqueeze(-1)).squeeze(-1)  # (B, num_agents)
        return (self.mixer(agent_q, state),)


class VDNNet(QMixNet):
    """QMixNet whose mixer sums (VDN)."""

    mixer_class = SumMixer


class TeamActor(Actor):
    """MADDPG's decentralised actors: one network per agent, on its own observation."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int):
        nn.Module.__init__(self)
        self.actors = nn.ModuleList(Actor(net_dim, state_dim, action_dim) for _ in range(num_agents))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        obs = state.unflatten(-1, (len(self.actors), -1))  # (..., num_agents, state_dim)
        return torch.cat([actor(obs[..., i, :]) for i, actor in enumerate(self.actors)], dim=-1)


class TeamCritic(nn.Module):
    """MADDPG's centralised critics (Lowe et al. arXiv:1706.02275, section 4.1): one network per
    agent, Q_i(s, a_1, ..., a_n) on every agent's observation and action."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int):
        super().__init__()
        self.critics = nn.ModuleList(Critic(net_dim, num_agents * state_dim, num_agents * action_dim)
                                     for _ in range(num_agents))

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """state (B, num_agents * state_dim), a joint action (B, num_agents * action_dim)
        or one per critic (num_agents, B, ...) -> every agent's Q (num_agents, B)."""
        actions = action if action.dim() == 3 else action.expand(len(self.critics), *action.shape)
        return torch.stack([critic(state, joint) for critic, joint in zip(self.critics, actions)])

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """One head that holds every agent's Q, (num_agents, B): each learns its own target."""
        return (self(state, action),)


class TeamActorDiscrete(nn.Module):
    """MADDPG's decentralised discrete actors; forward gives greedy actions (..., num_agents)."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int):
        super().__init__()
        self.nets = nn.ModuleList(mlp(net_dim, state_dim, action_dim, output_std=0.1)
                                  for _ in range(num_agents))

    def get_logits(self, state: torch.Tensor) -> torch.Tensor:
        """(..., num_agents * state_dim) -> logits (..., num_agents, action_dim)."""
        obs = state.unflatten(-1, (len(self.nets), -1))
        return torch.stack([net(obs[..., i, :]) for i, net in enumerate(self.nets)], dim=-2)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.get_logits(state).argmax(dim=-1)  # (..., num_agents)


class TeamCriticDiscrete(TeamCritic):
    """TeamCritic on one-hot actions; float ones (relaxed samples) are taken as they are."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int):
        super().__init__(net_dim, state_dim, action_dim, num_agents)
        self.action_dim = action_dim

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        if not action.is_floating_point():
            action = nn.functional.one_hot(action, self.action_dim).flatten(-2).float()  # (B, num_agents * action_dim)
        return super().forward(state, action)


class TeamCriticLocal(TeamCritic):
    """Decentralised critics Q_i(o_i, a_i), MADDPG's DDPG baseline (Lowe et al. arXiv:1706.02275,
    section 5), with TeamCritic's interface so that MADDPG's update serves it unchanged."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int):
        nn.Module.__init__(self)  # not TeamCritic's: its critics take every agent's inputs
        self.critics = nn.ModuleList(Critic(net_dim, state_dim, action_dim) for _ in range(num_agents))

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """As TeamCritic.forward; critic i reads agent i's slices only."""
        num_agents = len(self.critics)
        obs = state.unflatten(-1, (num_agents, -1))  # (B, num_agents, state_dim)
        actions = action if action.dim() == 3 else action.expand(num_agents, *action.shape)
        actions = actions.unflatten(-1, (num_agents, -1))  # (num_agents, B, num_agents, action_dim)
        return torch.stack([critic(obs[:, i], actions[i, :, i]) for i, critic in enumerate(self.critics)])


class TeamCriticLocalDiscrete(TeamCriticDiscrete, TeamCriticLocal):
    """TeamCriticLocal on one-hot actions, encoded as TeamCriticDiscrete encodes them."""


class TeamActorPPO(ActorPPO):
    """MAPPO's continuous actor: one Gaussian policy shared by every agent (with_agent_ids)."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int):
        super().__init__(net_dim, state_dim + num_agents, action_dim)
        self.num_agents = num_agents

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return super().forward(with_agent_ids(state, self.num_agents)).flatten(-2)

    def get_action_log_prob(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        action, log_prob = super().get_action_log_prob(with_agent_ids(state, self.num_agents))
        return action.flatten(-2), log_prob  # (..., num_agents * action_dim), (..., num_agents)

    def get_log_prob_entropy(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return super().get_log_prob_entropy(with_agent_ids(state, self.num_agents),
                                            action.unflatten(-1, (self.num_agents, -1)))


class TeamActorDiscretePPO(ActorDiscretePPO):
    """MAPPO's and COMA's discrete actor: one categorical policy shared by every agent."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int):
        super().__init__(net_dim, state_dim + num_agents, action_dim)
        self.num_agents = num_agents

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.get_log_probs(state).argmax(dim=-1)

    def get_logits(self, state: torch.Tensor) -> torch.Tensor:
        return super().get_logits(with_agent_ids(state, self.num_agents))


class ValueNorm(StateNorm):
    """Standardised value targets (MAPPO, Yu et al. arXiv:2103.01955, section 4.1), unclipped."""

    clip = math.inf


class TeamCriticValue(nn.Module):
    """MAPPO's centralised values V_i(s), (..., num_agents): the net learns standardised
    returns (value_norm); forward gives them in the returns' units."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int):
        super().__init__()
        self.state_norm = nn.Identity()
        self.net = mlp(net_dim, num_agents * state_dim, num_agents)
        self.value_norm = ValueNorm(num_agents)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.get_normalized_value(state) * self.value_norm.std + self.value_norm.mean

    def get_normalized_value(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.state_norm(state))  # (..., num_agents)


class COMACritic(nn.Module):
    """COMA's critic (Foerster et al. arXiv:1705.08926, section 4.2): row i is Q(s, (a_-i, .)),
    so the counterfactual baseline sum_a pi_i(a) Q(s, (a_-i, a)) takes one forward pass."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int):
        super().__init__()
        self.num_agents, self.action_dim = num_agents, action_dim
        self.net = mlp(net_dim, num_agents * (state_dim + action_dim + 1), action_dim)

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """state (..., num_agents * state_dim), action (..., num_agents) integers ->
        each agent's Q-values of its own actions, (..., num_agents, action_dim)."""
        n = self.num_agents
        others = 1 - torch.eye(n, device=state.device).unsqueeze(-1)  # (n, n, 1): agent i's row hides its own action
        actions = nn.functional.one_hot(action, self.action_dim).float().unsqueeze(-3) * others  # (..., n, n, A)
        ids = torch.eye(n, device=state.device).expand(*action.shape, n)  # (..., n, n)
        inputs = torch.cat((state.unsqueeze(-2).expand(*action.shape, -1), actions.flatten(-2), ids), dim=-1)
        return self.net(inputs)

    def get_q_taken(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Q(s, a) of the joint action taken, as each agent's row values it, (..., num_agents)."""
        return self(state, action).gather(-1, action.unsqueeze(-1)).squeeze(-1)


class QTranNet(nn.Module):
    """QTRAN-base (Son et al. arXiv:1905.05408, section 3): q_i, Q_jt(s, a) and V_jt(s), trained
    (AgentQTRAN) so that sum_i q_i - Q_jt + V_jt is 0 at the greedy joint action, >= 0 elsewhere.
    Q_jt is a plain network of (s, one-hot a), not the paper's summed hidden features."""

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, num_agents: int, if_noisy: bool = False):
        super().__init__()
        self.num_agents, self.action_dim = num_agents, action_dim
        self.agent_net = QNet(net_dim, state_dim + num_agents, action_dim, if_noisy)
        self.joint_net = mlp(net_dim, num_agents * (state_dim + action_dim), 1)
        shape = net_shape(net_dim)
        self.value_net = build_mlp([num_agents * state_dim, shape.widths[-1], 1], activation=shape.activation)

    forward = QMixNet.forward  # every agent's q-values, (..., num_agents, action_dim), for acting

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Q_jt(s, a) of a joint action, (num_agents,) integers a row -> (Q_jt (B,),)."""
        joint = nn.functional.one_hot(action, self.action_dim).flatten(-2).float()  # (B, num_agents * action_dim)
        return (self.joint_net(torch.cat((state, joint), dim=-1)).squeeze(-1),)

    def get_value(self, state: torch.Tensor) -> torch.Tensor:
        return self.value_net(state).squeeze(-1)  # V_jt(s), (B,)
